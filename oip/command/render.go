package command

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Render quotes argv as one POSIX sh command line: each word is quoted with
// mvdan.cc/sh/v3's syntax.Quote (LangPOSIX), or with plain single quotes for
// words that function refuses in POSIX mode (non-printable characters), and
// the words are joined by single spaces. Parsing the result with a POSIX
// shell yields exactly argv. Words must not contain NUL bytes, which no
// shell word can carry (Build refuses them); Render keeps such bytes inside
// single quotes rather than failing. Words that are not valid UTF-8 (which
// Build also refuses) are quoted correctly for /bin/sh, but some shell
// parsers, mvdan.cc/sh among them, refuse them.
func Render(argv []string) string {
	var b strings.Builder
	size := len(argv)
	for _, a := range argv {
		size += len(a) + 2
	}
	b.Grow(size)
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeQuoted(&b, a)
	}
	return b.String()
}

// Quote quotes one word for POSIX sh, as Render does.
func Quote(s string) string {
	var b strings.Builder
	writeQuoted(&b, s)
	return b.String()
}

func writeQuoted(b *strings.Builder, s string) {
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		b.WriteString(q)
		return
	}
	// POSIX sh has no escape sequences, but inside single quotes every byte
	// except NUL is literal; a single quote itself is written as '\''. A CR
	// before an LF ends one quoted run and the LF starts the next ('\r''\n'),
	// because some parsers (mvdan.cc/sh among them) read CR LF as a newline.
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			b.WriteString(`'\''`)
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteString("\r''")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}
