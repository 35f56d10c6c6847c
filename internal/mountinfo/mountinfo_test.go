package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:             "/plain",
		`/with\040space`:     "/with space",
		`/tab\011and\012nl`:  "/tab\tand\nnl",
		`/back\134slash`:     `/back\slash`,
		`/not\0a`:            `/not\0a`,
		`/high\777`:          `/high\777`,
		`/end\04`:            `/end\04`,
		`/two\040\040spaces`: "/two  spaces",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
