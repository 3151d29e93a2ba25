package markdown

import (
	"strings"
	"testing"
)

// TestMailShowsLinkHostsAndNoImages checks the mail renderer: a link's
// host beside its text, unless the text is the address; an image as text;
// the page renderer unchanged.
func TestMailShowsLinkHostsAndNoImages(t *testing.T) {
	t.Parallel()
	m := string(NewMail().Render("[docs](https://docs.example/a) and https://plain.example/b and ![x](https://t.example/p.gif) and [mail](mailto:a@b.example)"))
	for _, want := range []string{`>docs</a> <span>(docs.example)</span>`, `>https://plain.example/b</a> and`, `<span>[image: x, from t.example, not shown]</span>`, `>mail</a>`} {
		if !strings.Contains(m, want) {
			t.Errorf("mail rendering lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "<img") || strings.Contains(m, "(plain.example)") {
		t.Errorf("mail rendering:\n%s", m)
	}
	if p := string(New().Render("![x](https://t.example/p.gif)")); !strings.Contains(p, "<img") {
		t.Errorf("the page renderer no longer shows images: %s", p)
	}
}
