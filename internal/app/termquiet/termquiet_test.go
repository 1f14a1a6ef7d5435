package termquiet

import "testing"

func TestDarkBackground(t *testing.T) {
	for v, want := range map[string]bool{"": true, "15;0": true, "0;15": false, "0;7": false, "7;8": true, "default;default": true, "12;4": true, "0;11": false} {
		if got := DarkBackground(v); got != want {
			t.Errorf("DarkBackground(%q) = %v, want %v", v, got, want)
		}
	}
}
