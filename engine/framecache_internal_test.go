package engine

import (
	"strconv"
	"testing"
)

// The frame cache never holds more than maxCachedFrames frames, and its
// count matches what it holds.
func TestFrameCacheIsBounded(t *testing.T) {
	var c frameCache
	for i := range 3 * maxCachedFrames {
		c.put(&Encoded{RunID: strconv.Itoa(i), Version: 1})
		c.put(&Encoded{RunID: strconv.Itoa(i), Version: 2}) // replacing is not adding
	}
	held := 0
	c.m.Range(func(any, any) bool { held++; return true })
	if held > maxCachedFrames || int64(held) != c.n.Load() {
		t.Fatalf("holds %d frames, counts %d; bound %d", held, c.n.Load(), maxCachedFrames)
	}
	if held == 0 {
		t.Fatal("the cache forgot everything")
	}
}
