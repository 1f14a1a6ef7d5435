package protocol

// CheckSurrogates refuses JSON text holding a lone surrogate escape: a
// \uD800–\uDBFF not followed by a \uDC00–\uDFFF, or the latter alone.
// Such an escape encodes no Unicode character; decoders replace it by
// U+FFFD, so what was sent would not be what is stored, hashed or run.
// It returns an EInvalid *Error naming the escape and its byte offset, or
// nil. It reads the escapes of strings only (a \\u is an escaped
// backslash); b should be valid JSON, the decoder's errors come first.
func CheckSurrogates(b []byte) error {
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inStr {
			inStr = c == '"'
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				switch {
				case !ok:
				case r >= 0xD800 && r <= 0xDBFF:
					if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							i += 11 // the pair
							continue
						}
					}
					return loneSurrogate(b, i)
				case r >= 0xDC00 && r <= 0xDFFF:
					return loneSurrogate(b, i)
				}
			}
			i++ // the escaped character
		}
	}
	return nil
}

func loneSurrogate(b []byte, i int) error {
	return Errorf(EInvalid, "The JSON holds a lone surrogate escape (\\%s at byte %d), which encodes no character and would be replaced by U+FFFD; send the character itself (UTF-8) or a complete surrogate pair.",
		string(b[i+1:i+6]), i).With("offset", i)
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
