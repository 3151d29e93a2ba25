package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/interlockhq/interlock/protocol"
)

func TestFormatMoneyWritesTheCurrencysSymbolDigitsAndSeparators(t *testing.T) {
	t.Parallel()
	cases := []struct {
		amount   float64
		currency string
		want     string
	}{
		{4800, "USD", "$4,800.00"},
		{1250.5, "EUR", "€1,250.50"},
		{1200, "JPY", "¥1,200"},
		{1234567.891, "KWD", "KWD 1,234,567.891"},
		{1250, "CHF", "CHF 1,250.00"},
		{-42.1, "GBP", "-£42.10"},
		{999, "", "999.00"},
		{0, "USD", "$0.00"},
	}
	for _, c := range cases {
		if got := protocol.FormatMoney(c.amount, c.currency); got != c.want {
			t.Errorf("FormatMoney(%v, %q) = %q, want %q", c.amount, c.currency, got, c.want)
		}
	}
}

const refundSchema = `{
	"type": "object",
	"required": ["orderId", "amount"],
	"properties": {
		"orderId": {"type": "string", "title": "Order", "x-interlock-key": true},
		"amount": {"type": "number", "title": "Amount", "x-interlock-display": "currency", "maximum": 4800, "x-interlock-key": true},
		"currency": {"type": "string", "enum": ["USD", "EUR"]},
		"contact": {"type": "string", "format": "email"}
	}
}`

func TestArgsFollowTheSchemasOrderTitlesAndDisplay(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"zeta": true, "contact": "ann@example.com", "currency": "USD", "amount": 4800, "orderId": "o-1"}`)
	got := protocol.Args(args, json.RawMessage(refundSchema))
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "orderId,amount,currency,contact,zeta" {
		t.Fatalf("order = %v, want the schema's properties first, then the rest sorted", names)
	}
	amount := got[1]
	if amount.Title != "Amount" || amount.Text != "$4,800.00" || amount.Currency != "USD" || amount.Maximum == nil || *amount.Maximum != 4800 || !amount.Required {
		t.Errorf("amount = %+v", amount)
	}
	if c := got[2]; len(c.Enum) != 2 || !c.Enum[0].Selected(c.Value) {
		t.Errorf("currency enum = %+v", c.Enum)
	}
	if c := got[3]; c.Display != protocol.DisplayEmail || c.Title != "contact" {
		t.Errorf("contact = %+v, want an email display from its format, titled by its name", c)
	}
	if z := got[4]; z.Type != protocol.JSONBoolean || z.Text != "yes" || !z.Scalar() {
		t.Errorf("zeta = %+v, want a boolean typed by its value, shown yes", z)
	}
}

func TestArgsWithoutASchemaAreTypedByTheirValues(t *testing.T) {
	t.Parallel()
	got := protocol.Args(json.RawMessage(`{"b": [1, 2], "a": "x"}`), nil)
	if len(got) != 2 || got[0].Name != "a" || got[0].Type != protocol.JSONString || got[1].Scalar() || got[1].Text != "[1,2]" {
		t.Fatalf("args = %+v", got)
	}
	if protocol.Args(json.RawMessage(`[1]`), nil) != nil {
		t.Fatal("args that are not an object gave arguments")
	}
}

func TestKeyArgsAreTheMarkedOnesElseTheFirstScalarsWithoutTheCurrencyName(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"orderId": "o-1", "amount": 4800, "currency": "USD", "note": "x"}`)
	got := protocol.KeyArgs(args, json.RawMessage(refundSchema))
	if len(got) != 2 || got[0].Text != "o-1" || got[1].Text != "$4,800.00" {
		t.Fatalf("marked key args = %+v", got)
	}
	unmarked := `{"properties": {"amount": {"type": "number", "x-interlock-display": "currency"}}}`
	got = protocol.KeyArgs(args, json.RawMessage(unmarked))
	var names []string
	for _, k := range got {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "amount,note,orderId" {
		t.Fatalf("key args = %v, want three scalars, the currency's name left out", names)
	}
	long := json.RawMessage(`{"text": "` + strings.Repeat("é", 200) + `"}`)
	if k := protocol.KeyArgs(long, nil); len(k) != 1 || len(k[0].Text) > 90 || !utf8.ValidString(k[0].Text) {
		t.Fatalf("a long key arg = %q", k[0].Text)
	}
}

func TestAPolicySaysWhatHappensAtTheDeadline(t *testing.T) {
	t.Parallel()
	cases := map[string]*protocol.Policy{
		"":                                nil,
		"then it expires":                 {},
		"then it is rejected":             {Action: protocol.TimeoutReject},
		"then it is approved as proposed": {Action: protocol.TimeoutApprove},
		"then it goes to finance_lead":    {Action: protocol.TimeoutEscalate, ApproverRole: "finance_lead"},
	}
	for want, p := range cases {
		if got := p.Consequence(); got != want {
			t.Errorf("%+v.Consequence() = %q, want %q", p, got, want)
		}
	}
}

func TestMessagesReadTheCommonChatFormats(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`[
		{"role": "user", "content": "My order arrived broken."},
		{"role": "assistant", "content": [{"type": "text", "text": "Sorry to hear that."}, {"type": "image", "url": "x"}]},
		"plain text",
		{"role": "tool", "content": {"ok": true}},
		7
	]`)
	got := protocol.Messages(raw)
	want := []protocol.Message{
		{Role: "user", Text: "My order arrived broken."},
		{Role: "assistant", Text: "Sorry to hear that."},
		{Text: "plain text"},
		{Role: "tool", Text: `{"role":"tool","content":{"ok":true}}`},
		{Text: "7"},
	}
	if len(got) != len(want) {
		t.Fatalf("messages = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if protocol.Messages(json.RawMessage(`{}`)) != nil {
		t.Error("messages that are not a list gave messages")
	}
}

func FuzzArgs(f *testing.F) {
	f.Add([]byte(`{"amount": 4800, "currency": "USD"}`), []byte(refundSchema))
	f.Add([]byte(`{"a": {"b": [1]}}`), []byte(`{"properties": {"a": {"type": ["null", "object"]}}}`))
	f.Add([]byte(`{"t": "2026-11-21T10:30:00Z"}`), []byte(`{"properties": {"t": {"format": "date-time"}}}`))
	f.Fuzz(func(t *testing.T, args, schema []byte) {
		var obj map[string]json.RawMessage
		isObject := json.Unmarshal(args, &obj) == nil && obj != nil
		got := protocol.Args(args, schema)
		if !isObject && len(got) > 0 {
			t.Fatalf("Args(%q) of no object gave %d arguments", args, len(got))
		}
		if isObject && len(got) != len(obj) {
			t.Fatalf("Args(%q, %q) gave %d arguments of %d", args, schema, len(got), len(obj))
		}
		for _, k := range protocol.KeyArgs(args, schema) {
			if len(k.Text) > 90 || len(k.Title) > 90 {
				t.Fatalf("key arg %+v is longer than a row shows", k)
			}
		}
	})
}
