package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/oip/execution"
)

// capture is an output stream's sink: it hashes and counts every byte and
// keeps the first max of them.
type capture struct {
	max  int64
	buf  []byte
	size int64
	h    hash.Hash
}

func newCapture(max int64) *capture {
	return &capture{max: max, h: sha256.New()}
}

// Write implements io.Writer; it never fails.
func (c *capture) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.size += int64(len(p))
	if room := c.max - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(room, int64(len(p)))]...)
	}
	return len(p), nil
}

func (c *capture) truncated() bool { return c.size > int64(len(c.buf)) }

// stream returns the recorded form: the kept text (cut back to a whole
// UTF-8 character when truncated, invalid bytes replaced by U+FFFD), the
// full size and the SHA-256 of every byte.
func (c *capture) stream() *execution.Stream {
	kept := c.buf
	if c.truncated() {
		// Drop a character the cap cut in two.
		for i := len(kept) - 1; i >= 0 && i >= len(kept)-utf8.UTFMax; i-- {
			if utf8.RuneStart(kept[i]) {
				if !utf8.FullRune(kept[i:]) {
					kept = kept[:i]
				}
				break
			}
		}
	}
	return &execution.Stream{
		Text:      strings.ToValidUTF8(string(kept), "\uFFFD"),
		Size:      c.size,
		SHA256:    hex.EncodeToString(c.h.Sum(nil)),
		Truncated: c.truncated(),
	}
}
