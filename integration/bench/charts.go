package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var colors = [4]color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // factory
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // plain kgo
	color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, // control (plain kgo)
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // a second factory (vFactory2)
}

// darkColors are darker shades of colors, for a second series of a client
// (its p99 beside its p50).
var darkColors = [4]color.Color{
	color.RGBA{R: 0x0b, G: 0x3c, B: 0x5d, A: 0xff},
	color.RGBA{R: 0xa8, G: 0x4e, B: 0x00, A: 0xff},
	color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
	color.RGBA{R: 0x14, G: 0x5a, B: 0x14, A: 0xff},
}

func save(p *plot.Plot, dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return "", fmt.Errorf("chart %s: %w", name, err)
	}
	return path, nil
}

// overheadCharts draws throughput per round and pooled latency quantiles.
func overheadCharts(r *overheadResult, dir, prefix, title string) ([]string, error) {
	p := plot.New()
	p.Title.Text = title + ": throughput per round (1 KiB records)"
	p.X.Label.Text = "round"
	p.Y.Label.Text = "records/s"
	for v := range r.Tput {
		pts := make(plotter.XYs, len(r.Tput[v]))
		for i, y := range r.Tput[v] {
			pts[i] = plotter.XY{X: float64(i + 1), Y: y}
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = colors[v], colors[v]
		p.Add(l, s)
		p.Legend.Add(r.nameOf(v), l, s)
	}
	p.Y.Min = 0
	p.Legend.Top = false
	a, err := save(p, dir, prefix+"_throughput.png")
	if err != nil {
		return nil, err
	}

	p = plot.New()
	p.Title.Text = title + ": produce latency, all rounds pooled"
	p.Y.Label.Text = "ms"
	w := vg.Points(30)
	for v := range r.Lat {
		vals := plotter.Values{quantile(r.Lat[v], 0.5), quantile(r.Lat[v], 0.99)}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Color = colors[v]
		b.Offset = w * (vg.Length(v) - vg.Length(len(r.Lat)-1)/2)
		p.Add(b)
		p.Legend.Add(r.nameOf(v), b)
	}
	p.NominalX("p50", "p99")
	// The bars sit beside their tick by an offset gonum does not count in
	// the data range: widen it so the outer bars are not cut off. The
	// legend goes over the short p50 bars, not the p99 ones.
	p.X.Min, p.X.Max = -0.6, 1.6
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	b, err := save(p, dir, prefix+"_latency.png")
	if err != nil {
		return nil, err
	}
	return []string{a, b}, nil
}

// rywChart draws p50 and p99 of create → produce → consume per lag.
func rywChart(rs []rywResult, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = "Read-your-writes: create → produce ack → first record consumed"
	p.Y.Label.Text = "ms (successful trials)"
	p.X.Label.Text = "apply lag of 2 of 3 brokers"
	w := vg.Points(14)
	series := []struct {
		v    int
		q    float64
		name string
	}{{vFactory, 0.5, "factory p50"}, {vFactory, 0.99, "factory p99"}, {vPlain, 0.5, "plain p50"}, {vPlain, 0.99, "plain p99"}}
	for i, s := range series {
		vals := make(plotter.Values, len(rs))
		for j, r := range rs {
			sum := r.summary(s.v)
			vals[j] = sum.P50
			if s.q > 0.5 {
				vals[j] = sum.P99
			}
			if vals[j] != vals[j] { // NaN: every trial failed
				vals[j] = 0
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return "", err
		}
		b.Color = colors[s.v]
		if s.q > 0.5 {
			b.Color = darkColors[s.v]
		}
		b.Offset = w * vg.Length(2*i-3) / 2
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Lag.String()
	}
	p.NominalX(names...)
	p.Legend.Top = true
	p.Legend.Left = true
	return save(p, dir, "ryw_latency.png")
}

// misrouteChart draws every recovery time as a box per client and kind of
// trial.
func misrouteChart(r *misrouteResult, dir, name string) (string, error) {
	p := plot.New()
	p.Title.Text = "Misroute recovery: move or repair → record acknowledged by the right cluster"
	p.Y.Label.Text = "ms"
	var names []string
	for _, kind := range []string{kindMove, kindRepair} {
		for c := range r.Clients {
			var vals plotter.Values
			for _, tr := range r.Trials[c] {
				if tr.Kind == kind && tr.Failed == "" {
					vals = append(vals, ms(tr.Recovery))
				}
			}
			if len(vals) == 0 {
				continue
			}
			b, err := plotter.NewBoxPlot(vg.Points(40), float64(len(names)), vals)
			if err != nil {
				return "", err
			}
			b.FillColor = colors[c%len(colors)]
			p.Add(b)
			names = append(names, r.Clients[c]+", "+kind)
		}
	}
	p.NominalX(names...)
	p.Y.Min = 0
	return save(p, dir, name)
}
