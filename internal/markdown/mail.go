package markdown

import (
	"net/url"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// NewMail returns a renderer for mail, which a reader cannot inspect as a
// browser lets them: each link shows its host beside its text (a label
// does not hide where a link goes), and no image is fetched (a remote
// image tracks the reader, or shows what the sender chose): an image is
// its description and its host, as text.
func NewMail() *Renderer {
	r := New()
	r.md = goldmark.New(
		goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(mailNodes{}, 100))),
	)
	return r
}

// mailNodes renders links with their hosts and images as text.
type mailNodes struct{}

// RegisterFuncs implements renderer.NodeRenderer.
func (mailNodes) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindLink, renderLink)
	reg.Register(ast.KindImage, renderImage)
}

// hostOf is the host a URL goes to, or "" for none (a mailto, a relative
// link).
func hostOf(dest []byte) string {
	u, err := url.Parse(string(dest))
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Hostname()
}

// renderLink writes a link as goldmark does, and after it its host in
// parentheses, unless the text is the address itself.
func renderLink(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	l := n.(*ast.Link)
	if entering {
		_, _ = w.WriteString(`<a href="`)
		if html.IsDangerousURL(l.Destination) {
			_, _ = w.WriteString("#")
		} else {
			_, _ = w.Write(util.EscapeHTML(util.URLEscape(l.Destination, true)))
		}
		_, _ = w.WriteString(`">`)
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString("</a>")
	host := hostOf(l.Destination)
	if host != "" && string(nodeText(l, source)) != string(l.Destination) {
		_, _ = w.WriteString(` <span class="host">(`)
		_, _ = w.Write(util.EscapeHTML([]byte(host)))
		_, _ = w.WriteString(`)</span>`)
	}
	return ast.WalkContinue, nil
}

// renderImage writes an image as its description and host, in brackets,
// and fetches nothing.
func renderImage(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	img := n.(*ast.Image)
	_, _ = w.WriteString(`<span class="image">[image`)
	if alt := nodeText(img, source); len(alt) > 0 {
		_, _ = w.WriteString(": ")
		_, _ = w.Write(util.EscapeHTML(alt))
	}
	if host := hostOf(img.Destination); host != "" {
		_, _ = w.WriteString(", from ")
		_, _ = w.Write(util.EscapeHTML([]byte(host)))
		_, _ = w.WriteString(", not shown")
	}
	_, _ = w.WriteString(`]</span>`)
	return ast.WalkSkipChildren, nil
}

// nodeText is the text of n's children.
func nodeText(n ast.Node, source []byte) []byte {
	var b []byte
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			b = append(b, t.Segment.Value(source)...)
		} else {
			b = append(b, nodeText(c, source)...)
		}
	}
	return b
}
