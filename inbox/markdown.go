package inbox

import (
	"html/template"

	imarkdown "github.com/interlockhq/interlock/internal/markdown"
)

// markdown renders the Markdown of an approval's description (or of an
// argument shown as Markdown) to HTML safe to put in a page (see
// internal/markdown, which the mail shares).
type markdown struct{ r *imarkdown.Renderer }

func newMarkdown() *markdown { return &markdown{r: imarkdown.New()} }

// render returns src rendered, or src escaped as text when it cannot be
// rendered.
func (m *markdown) render(src string) template.HTML { return m.r.Render(src) }
