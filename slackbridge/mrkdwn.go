package slackbridge

import (
	"net/url"
	"regexp"
	"strings"
)

// Slack's mrkdwn is not Markdown, and anything between < and > in it is a
// command to Slack: a mention (<@U012>, <!channel>), a link whose label
// hides where it goes (<https://evil.example|bank.example>), a date. Text
// that comes from a flow, an agent or its arguments is therefore written
// with [esc] (< and > become entities) and converted by [mrkdwnOf], which
// makes links itself, labelled with the host they really go to, and sent
// as verbatim text, which Slack does not scan for names and links.

var (
	mdHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	mdBullet  = regexp.MustCompile(`^(\s*)[-*+]\s+`)
	mdQuote   = regexp.MustCompile(`^\s{0,3}>\s?`)
	mdFence   = regexp.MustCompile("^\\s{0,3}(```|~~~)")
	mdRule    = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	// mdLink is a link or an image: ![alt](src) or [label](url "title").
	mdLink   = regexp.MustCompile(`(!?)\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	mdTag    = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|<!--.*?-->`)
	mdBold   = regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*|__(\S(?:.*?\S)?)__`)
	mdItalic = regexp.MustCompile(`(^|[^\w*])\*(\S(?:[^*]*?\S)?)\*|(^|[^\w_])_(\S(?:[^_]*?\S)?)_`)
	mdStrike = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
	// broadcast is a bare @channel, @here or @everyone: not a mention in
	// verbatim text, and broken with a zero-width space all the same.
	broadcast = regexp.MustCompile(`(?i)@(channel|here|everyone)\b`)
)

// boldMark stands for a bold's * while italics are converted.
const boldMark = "\uE000"

// mrkdwnOf converts Markdown (CommonMark's common parts) to Slack mrkdwn
// that can only show text: headings and bold become bold, lists bullets,
// links "label (host)" with host the link's own, images their alt text;
// raw HTML is dropped, code kept as code, and every < and > escaped.
func mrkdwnOf(md string) string {
	var out []string
	fenced := false
	for _, line := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n") {
		if mdFence.MatchString(line) {
			fenced = !fenced
			out = append(out, "```")
			continue
		}
		if fenced {
			out = append(out, esc(line))
			continue
		}
		switch {
		case mdRule.MatchString(line):
			out = append(out, "───")
		case mdHeading.MatchString(line):
			out = append(out, "*"+strings.Trim(inline(mdHeading.FindStringSubmatch(line)[1]), "*")+"*")
		case mdQuote.MatchString(line):
			out = append(out, ">"+inline(mdQuote.ReplaceAllString(line, "")))
		case mdBullet.MatchString(line):
			m := mdBullet.FindStringSubmatch(line)
			out = append(out, m[1]+"• "+inline(line[len(m[0]):]))
		default:
			out = append(out, inline(line))
		}
	}
	if fenced {
		out = append(out, "```")
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// inline converts one line's code spans, links and emphasis.
func inline(line string) string {
	var b strings.Builder
	parts := strings.Split(line, "`")
	for i, p := range parts {
		switch {
		case i%2 == 1 && i < len(parts)-1:
			b.WriteString("`" + esc(p) + "`")
		case i%2 == 1:
			// An unclosed backtick is a backtick.
			b.WriteString("`" + links(p))
		default:
			b.WriteString(links(p))
		}
	}
	return b.String()
}

// links converts the links and images of text outside code.
func links(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range mdLink.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(emphasis(s[last:m[0]]))
		last = m[1]
		image, label, target := s[m[2]:m[3]], s[m[4]:m[5]], s[m[6]:m[7]]
		if image != "" {
			// Images are not fetched: their alt text stands for them.
			b.WriteString(emphasis(label))
			continue
		}
		b.WriteString(link(label, target))
	}
	b.WriteString(emphasis(s[last:]))
	return b.String()
}

// link writes a Markdown link as its label followed by a Slack link whose
// own label is the host it goes to, so that no label can pass for
// another address. A link that is not http, https or mailto is its label.
func link(label, target string) string {
	text := emphasis(label)
	u, ok := safeURL(target)
	if !ok {
		return text
	}
	host := u.Host
	if u.Scheme == "mailto" {
		host = u.Opaque
	}
	if strings.TrimSpace(label) == "" {
		text = ""
	} else {
		text += " "
	}
	return text + "(<" + u.String() + "|" + esc(host) + ">)"
}

// safeURL parses an address a message may link to: http, https or mailto,
// with nothing in it that would end Slack's <url|label>.
func safeURL(s string) (*url.URL, bool) {
	if s == "" || strings.ContainsAny(s, "<>|\"' \t\n") {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" || u.User != nil {
			return nil, false
		}
	case "mailto":
		if u.Opaque == "" || strings.ContainsAny(u.Opaque, "?&") {
			return nil, false
		}
	default:
		return nil, false
	}
	if strings.ContainsAny(u.String(), "<>|") {
		return nil, false
	}
	return u, true
}

// emphasis escapes plain text and converts its bold, italics and
// strikethrough; HTML tags are dropped.
func emphasis(s string) string {
	s = mdTag.ReplaceAllString(s, "")
	s = esc(s)
	s = mdBold.ReplaceAllString(s, boldMark+"$1$2"+boldMark)
	s = mdItalic.ReplaceAllString(s, "${1}${3}_${2}${4}_")
	s = mdStrike.ReplaceAllString(s, "~$1~")
	s = strings.ReplaceAll(s, boldMark, "*")
	return defuse(s)
}

// defuse breaks a bare @channel, @here or @everyone in text.
func defuse(s string) string { return broadcast.ReplaceAllString(s, "@\u200b$1") }

// safe is plain text from outside for mrkdwn: escaped and defused.
func safe(s string) string { return defuse(esc(s)) }
