package teams

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/interlockhq/interlock/protocol"
)

// Limits of what a card shows, well inside the 28 KB Teams takes in one
// message.
const (
	maxDescription = 3000
	maxLine        = 300
	maxFacts       = 30
)

// Teams renders a subset of Markdown in a TextBlock and a Fact: bold,
// italic, lists and links, and <at>…</at> mentions backed by the card's
// entities. Text written by a flow or an agent (a title, a description,
// an argument) is shown with its emphasis and lists, but never as a link
// or a mention: a link shows its text, and what would still be taken for
// a web address is defanged (https[:]//, www[.]), so that the card's only
// links are the ones Interlock adds.
var (
	// ![alt](url) and [text](url), also with a title or angle brackets.
	mdImage = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	mdLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// [text]: url, a reference definition, and [text][ref].
	mdRefDef  = regexp.MustCompile(`(?m)^[ \t]{0,3}\[[^\]]*\]:.*$`)
	mdRefLink = regexp.MustCompile(`\[([^\]]*)\]\[[^\]]*\]`)
	// <https://...> autolinks, <at>…</at> mentions, and any other tag.
	htmlTag = regexp.MustCompile(`<[A-Za-z/!?][^<>]*>`)
	// a scheme followed by //, as in https://, and a bare www.
	urlScheme = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]{1,31}):(/+|\\+)`)
	bareWWW   = regexp.MustCompile(`(?i)\bwww\.`)
	// # headings and ``` fences, which a TextBlock shows as they are.
	mdHeading = regexp.MustCompile(`(?m)^[ \t]{0,3}#{1,6}[ \t]+`)
)

// markdown is text written in Markdown (a description) made safe to show
// in a TextBlock: its links reduced to their text, tags and mentions
// removed, web addresses defanged, at most n bytes.
func markdown(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "```", "")
	s = strings.ReplaceAll(s, "`", "")
	s = mdRefDef.ReplaceAllString(s, "")
	s = mdImage.ReplaceAllString(s, "$1")
	// Twice, for a link in a link's text.
	s = mdLink.ReplaceAllString(s, "$1")
	s = mdLink.ReplaceAllString(s, "$1")
	s = mdRefLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	s = mdHeading.ReplaceAllString(s, "")
	s = defang(s)
	return strings.TrimSpace(protocol.Truncate(s, n))
}

// defang makes what is left of a web address plain text: https://host
// becomes https[:]//host and www. www[.]; what could still open a link,
// "](", is spaced apart.
func defang(s string) string {
	s = urlScheme.ReplaceAllString(s, "$1[:]//")
	s = bareWWW.ReplaceAllStringFunc(s, func(w string) string { return w[:3] + "[.]" })
	return strings.ReplaceAll(s, "](", "] (")
}

// plain is one line of text from a flow or an agent (a title, an
// argument, a name), made safe as markdown is, on one line, at most n
// bytes.
func plain(s string, n int) string {
	s = markdown(s, 4*n)
	s = strings.Join(strings.Fields(s), " ")
	return protocol.Truncate(s, n)
}

// firstBytes is the start of a receiver's answer, for an error: at most
// n bytes of valid UTF-8 on one line.
func firstBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "")), " ")
}
