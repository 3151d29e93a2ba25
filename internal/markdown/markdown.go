// Package markdown renders the Markdown people write in an approval (its
// description, an argument shown as Markdown) to HTML safe to put in a
// page or a mail: no raw HTML, no script, links of http, https and mailto
// only.
package markdown

import (
	"bytes"
	"html/template"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// Renderer renders Markdown safely: goldmark without its unsafe mode
// leaves raw HTML out and drops links whose scheme may run script, and a
// sanitizer then keeps only the elements and attributes of formatted
// text, links of http, https and mailto, with rel="nofollow noopener" and
// target="_blank". It is safe for concurrent use.
type Renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

// New returns a renderer.
func New() *Renderer {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &Renderer{
		md:     goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify)),
		policy: p,
	}
}

// Render returns src rendered, or src escaped as text when it cannot be
// rendered.
func (r *Renderer) Render(src string) template.HTML {
	var b bytes.Buffer
	if err := r.md.Convert([]byte(src), &b); err != nil {
		return template.HTML(template.HTMLEscapeString(src)) // escaped text
	}
	return template.HTML(r.policy.SanitizeBytes(b.Bytes())) // sanitized HTML
}
