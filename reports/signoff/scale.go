package signoff

import (
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
)

// scaleRun is one bench-scale result the page shows: what
// reconstruction cost on a busy node, against the number of volumes.
type scaleRun struct {
	Result *scale.Result
	// Link is the result's own page (bench-scale.md) relative to the
	// output dir.
	Link   string
	Panels []scalePanel
}

// scalePanel is one chart of a result and its tables.
type scalePanel struct {
	scale.Panel
	// Chart is the chart's SVG file relative to the output dir, for the
	// Markdown page; SVG is the chart itself, for the HTML page to
	// inline.
	Chart        string
	SVG          string
	Points, Fits scale.Table
}

// ID is a stable fragment id for the result.
func (s scaleRun) ID() string {
	return "scale-" + slug(s.Result.Started.UTC().Format("20060102-150405")+"-"+s.Result.Provider)
}

// Title names the result: its plan and provider.
func (s scaleRun) Title() string {
	return fmt.Sprintf("%s on %s", strings.Join(s.Result.Plan, " → "), s.Result.Provider)
}

// AddScale puts the bench-scale results found under the runs' dir on the
// page, oldest first, with links relative to outDir.
func (p *Page) AddScale(found []scale.Found, outDir string) {
	for _, f := range found {
		dir := filepath.Dir(f.Path)
		s := scaleRun{Result: f.Result, Link: relLink(outDir, filepath.Join(dir, scale.MarkdownFileName))}
		for _, pn := range f.Result.Panels() {
			s.Panels = append(s.Panels, scalePanel{Panel: pn, Chart: relLink(outDir, filepath.Join(dir, pn.ChartFile())), SVG: f.Result.SVG(pn),
				Points: f.Result.PointsTable(pn), Fits: f.Result.FitsTable(pn)})
		}
		p.Scale = append(p.Scale, s)
	}
}

// writeScaleMarkdown is the page's section of the bench-scale results.
func writeScaleMarkdown(b *strings.Builder, p *Page) {
	if len(p.Scale) == 0 {
		return
	}
	b.WriteString("## Reconstruction at scale\n\n")
	b.WriteString("What a kubelet's restart costs on a busy node, from `skewtest bench-scale`: each hop's times, the kubelet's CPU and peak memory, and its reconstruct counters against the number of volumes it found.\n\n")
	for _, s := range p.Scale {
		fmt.Fprintf(b, "### %s\n\n", reports.MarkdownText(s.Title()))
		b.WriteString(s.Result.Intro())
		if s.Link != "" {
			fmt.Fprintf(b, " [Its page](%s).", s.Link)
		}
		b.WriteString("\n\n")
		charts := map[scale.Panel]string{}
		for _, pn := range s.Panels {
			charts[pn.Panel] = pn.Chart
		}
		b.WriteString(s.Result.Markdown(4, func(pn scale.Panel) string { return charts[pn] }))
	}
}
