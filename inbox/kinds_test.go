package inbox

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryInterruptKindHasAView(t *testing.T) {
	pages, err := pages(newMarkdown())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range protocol.Kinds() {
		v, ok := kindViews[k]
		if !ok || v.summary == nil || v.prepare == nil || v.read == nil || v.field == nil {
			t.Errorf("kind %s has no complete view in kinds.go: the inbox cannot show or read its form", k)
		}
		for _, part := range []string{"title", "ask", "asks"} {
			for name, p := range pages {
				if p.Lookup(part+"-"+k) == nil {
					t.Errorf("page %s has no template %s-%s: add it to templates/kinds.html", name, part, k)
				}
			}
		}
	}
	for k := range kindViews {
		if _, ok := protocol.SpecOf(k); !ok {
			t.Errorf("kinds.go has a view of %q, which is no kind of protocol.Kinds", k)
		}
	}
}
