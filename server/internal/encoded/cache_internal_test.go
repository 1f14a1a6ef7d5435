package encoded

import (
	"strconv"
	"testing"
)

// A cache of answers never holds more than maxCachedFrames frames, and its
// count matches what it holds.
func TestFrameCacheIsBounded(t *testing.T) {
	var c answers
	for i := range 3 * maxCachedFrames {
		c.put(&Answer{RunID: strconv.Itoa(i), Version: 1})
		c.put(&Answer{RunID: strconv.Itoa(i), Version: 2}) // replacing is not adding
	}
	held := 0
	c.m.Range(func(any, any) bool { held++; return true })
	if held > maxCachedFrames || int64(held) != c.n.Load() {
		t.Fatalf("holds %d frames, counts %d; bound %d", held, c.n.Load(), maxCachedFrames)
	}
	if held == 0 {
		t.Fatal("the cache forgot everything")
	}

	// Bytes: large answers fill the byte budget long before the count.
	var b answers
	body := make([]byte, 60<<10)
	for i := range 4 * maxCachedFrameBytes / len(body) {
		b.put(&Answer{RunID: strconv.Itoa(i), Version: 1, Body: body})
	}
	var sum int64
	b.m.Range(func(_, v any) bool { sum += int64(len(v.(*Answer).Body)); return true })
	if sum > maxCachedFrameBytes || sum != b.bytes.Load() {
		t.Fatalf("holds %d bytes, counts %d; bound %d", sum, b.bytes.Load(), maxCachedFrameBytes)
	}
	b.put(&Answer{RunID: "0", Version: 2, Body: make([]byte, maxCachedFrame+1)})
	if b.get("0", 1, "") != nil || b.get("0", 2, "") != nil {
		t.Fatal("an answer over maxCachedFrame is kept, or a stale one stayed")
	}
}
