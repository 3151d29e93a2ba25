package inbox

import (
	"bytes"
	"html/template"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// markdown renders the Markdown of an approval's description (or of an
// argument shown as Markdown) to HTML safe to put in a page: goldmark
// without its unsafe mode leaves raw HTML out and drops links whose
// scheme may run script, and a sanitizer then keeps only the elements
// and attributes of formatted text, links of http, https and mailto, with
// rel="nofollow noopener" and target="_blank".
type markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

func newMarkdown() *markdown {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &markdown{
		md:     goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify)),
		policy: p,
	}
}

// render returns src rendered, or src escaped as text when it cannot be
// rendered.
func (m *markdown) render(src string) template.HTML {
	var b bytes.Buffer
	if err := m.md.Convert([]byte(src), &b); err != nil {
		return template.HTML(template.HTMLEscapeString(src)) // escaped text
	}
	return template.HTML(m.policy.SanitizeBytes(b.Bytes())) // sanitized HTML
}
