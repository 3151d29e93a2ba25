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
		for _, part := range []string{"title", "propose", "ask", "asks"} {
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

func TestASchemasRefusalIsSaidInWordsUnderTheArgumentsTitle(t *testing.T) {
	for _, c := range []struct{ name, title, msg, want string }{
		{"amount", "Amount", "/amount: must be <= 10000", "Amount must be at most 10000."},
		{"amount", "Amount", "/amount: must be > 0", "Amount must be more than 0."},
		{"address", "Address", "/address: must be at least 10 characters", "Address must be at least 10 characters."},
		{"address", "", "/address/street: missing number", "address (street) missing number."},
		{"amount", "Amount", "Amount is not a number.", "Amount is not a number."},
		{"amount", "Amount", "/amounts: must be <= 1", "/amounts: must be <= 1"},
		{"amount", "Amount", "/amount: must be <= 1; /note: must be at most 5 characters", "/amount: must be <= 1; /note: must be at most 5 characters"},
	} {
		if got := inWords(c.name, c.title, c.msg); got != c.want {
			t.Errorf("inWords(%q, %q, %q) = %q, want %q", c.name, c.title, c.msg, got, c.want)
		}
	}
}

// TestTheReasonIsShownOnlyWhenTheDescriptionDoesNotSayIt: "Why it needs
// approval" repeated the description word for word; each is said once.
func TestTheReasonIsShownOnlyWhenTheDescriptionDoesNotSayIt(t *testing.T) {
	for _, c := range []struct {
		description, reason string
		show                bool
	}{
		{"The agent wants to refund **$4,800.00**. Refunds over $500 need a supervisor.", "Refunds over $500 need a  supervisor.", false},
		{"Refunds over $500 need a supervisor.", "refunds over $500 need a *supervisor*.", false},
		{"The agent wants to refund $4,800.00.", "Refunds over $500 need a supervisor.", true},
		{"", "Refunds over $500 need a supervisor.", true},
		{"Anything.", "", false},
	} {
		iv := &interruptView{Errors: map[string]string{}, Values: map[string]string{}}
		iv.Kind, iv.Description, iv.Reason = protocol.KindApproval, c.description, c.reason
		prepareApproval(iv)
		if iv.ShowReason != c.show {
			t.Errorf("description %q, reason %q: ShowReason %v, want %v", c.description, c.reason, iv.ShowReason, c.show)
		}
	}
}
