package slackbridge

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/protocol"
)

func TestMarkdownBecomesMrkdwnThatMentionsNobodyAndLinksOnlyWhereItSays(t *testing.T) {
	for _, tc := range []struct{ name, md, want string }{
		{"bold and italics", "**now** and *soon* and __also__", "*now* and _soon_ and *also*"},
		{"heading and bullets", "# Refund\n- one\n* two", "*Refund*\n• one\n• two"},
		{"channel mention", "<!channel> pay", "&lt;!channel&gt; pay"},
		{"user mention", "ask <@U0BOSS>", "ask &lt;@U0BOSS&gt;"},
		{"bare broadcast", "@here @Channel @everyone", "@\u200bhere @\u200bChannel @\u200beveryone"},
		{"a label that is another address", "[https://bank.example](https://evil.example/x)", "https://bank.example (<https://evil.example/x|evil.example>)"},
		{"a Slack link written raw", "<https://evil.example|bank.example>", "&lt;https://evil.example|bank.example&gt;"},
		{"javascript link", "[click](javascript:alert)", "click"},
		{"link with a pipe", "[x](https://evil.example/a|b)", "x"},
		{"mailto", "[write](mailto:ann@example.com)", "write (<mailto:ann@example.com|ann@example.com>)"},
		{"image", "![logo](https://tracker.example/p.png)", "logo"},
		{"html", "<b>bold</b><script>alert(1)</script><img src=x onerror=y>", "boldalert(1)"},
		{"code keeps its text", "`<!here>` and **x**", "`&lt;!here&gt;` and *x*"},
		{"fenced code", "```\n<@U1> **not bold**\n```", "```\n&lt;@U1&gt; **not bold**\n```"},
		{"unclosed fence", "```\n<!channel>", "```\n&lt;!channel&gt;\n```"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mrkdwnOf(tc.md); got != tc.want {
				t.Errorf("mrkdwnOf(%q)\n got %q\nwant %q", tc.md, got, tc.want)
			}
		})
	}
}

func TestAGateRunsMessageShowsTheLastMessagesOfItsConversationCutShort(t *testing.T) {
	in := protocol.Interrupted{Flow: protocol.GateFlow, Run: "call-1", Kind: protocol.KindApproval, Action: "refund",
		Args: []byte(`{"amount": 4800}`)}
	var msgs []protocol.Message
	for _, text := range []string{"hello", "first", "second", "third <!channel>", strings.Repeat("long ", 200)} {
		msgs = append(msgs, protocol.Message{Role: "user", Text: text})
	}
	blocks := approvalBlocks(in, card{where: where(in.Flow, in.Run), conv: &talk{ID: "conv-9", Agent: "support-bot", Messages: msgs}})
	var shown string
	for _, b := range blocks {
		if c, ok := b.(*slack.ContextBlock); ok && c.BlockID == blockConversation {
			shown = c.ContextElements.Elements[0].(*slack.TextBlockObject).Text
		}
	}
	if shown == "" {
		t.Fatalf("no conversation block in %d blocks", len(blocks))
	}
	for _, want := range []string{"conv-9", "*support-bot*", "the last 4 messages; 1 before them", "*user:* first", "third &lt;!channel&gt;", "long long long", "…"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the conversation lacks %q: %s", want, shown)
		}
	}
	if strings.Contains(shown, "hello") || len(shown) > 1900 {
		t.Errorf("the conversation shows more than its last messages, cut short: %s", shown)
	}
}
