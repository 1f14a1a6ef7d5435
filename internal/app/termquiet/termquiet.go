// Package termquiet keeps asmp from querying the terminal.
//
// Lip Gloss finds out whether the terminal's background is dark by asking
// the terminal (termenv writes ESC ] 11 ; ? and ESC [ 6 n and reads the
// answers, waiting up to 5 s), and Bubble Tea's package init asks at once,
// in every program that links it, whenever standard output is a terminal.
// A terminal that does not answer (a silent PTY such as CLRUN's, a serial
// line) then costs 5 s at every start, and whatever is typed meanwhile is
// read as the answer and lost. The plain line loop, TERM=dumb and pipes
// must never query; the full-screen UI must not wait on an answer either.
//
// Importing this package settles the question without asking: its init
// sets Lip Gloss's background explicitly (dark, unless COLORFGBG names a
// light one). It runs before Bubble Tea's init because Go initializes
// packages that are ready in the order of their import paths, and
// github.com/asmp-dev/… comes before github.com/charmbracelet/…; this
// package imports nothing that depends on Bubble Tea. asmp's styles use
// fixed ANSI colours, so nothing is lost.
package termquiet

import (
	"os"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

func init() {
	lipgloss.SetHasDarkBackground(DarkBackground(os.Getenv("COLORFGBG")))
}

// DarkBackground reports whether COLORFGBG ("fg;bg", as rxvt and others
// set it) names a dark background; without it the background is taken
// for dark, as termenv does when the terminal does not answer.
func DarkBackground(colorFGBG string) bool {
	i := strings.LastIndex(colorFGBG, ";")
	if i < 0 {
		return true
	}
	bg, err := strconv.Atoi(strings.TrimSpace(colorFGBG[i+1:]))
	if err != nil {
		return true
	}
	return bg != 7 && (bg < 9 || bg > 15) // 7 and the bright 9-15 are light
}
