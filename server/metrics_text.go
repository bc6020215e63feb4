package server

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Prometheus' text format (version 0.0.4), written by hand: each family is
// one "# HELP" and one "# TYPE" line followed by all of its samples, and a
// histogram is its cumulative _bucket{le=…} series, _sum and _count, which
// Prometheus and Grafana read as a histogram. VictoriaMetrics/metrics, which
// writes the Go runtime's and the process's series, has neither help texts
// nor such histograms in the version chatd uses (docs/operations.md says why
// chatd keeps it for those).

// promText accumulates an exposition.
type promText struct{ bytes.Buffer }

// family starts a metric family: its help text and type.
func (p *promText) family(name, typ, help string) {
	p.WriteString("# HELP ")
	p.WriteString(name)
	p.WriteByte(' ')
	p.WriteString(escapeHelp(help))
	p.WriteString("\n# TYPE ")
	p.WriteString(name)
	p.WriteByte(' ')
	p.WriteString(typ)
	p.WriteByte('\n')
}

// sample writes one sample of name; labels is "" or a label set as
// labelSet renders it.
func (p *promText) sample(name, labels string, v float64) {
	p.WriteString(name)
	if labels != "" {
		p.WriteByte('{')
		p.WriteString(labels)
		p.WriteByte('}')
	}
	p.WriteByte(' ')
	p.WriteString(formatValue(v))
	p.WriteByte('\n')
}

// one writes a family of a single unlabelled sample.
func (p *promText) one(name, typ, help string, v float64) {
	p.family(name, typ, help)
	p.sample(name, "", v)
}

// labelSet renders label names and values, given in pairs, as a label set
// without its braces: name="value",…
func labelSet(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pairs[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(pairs[i+1]))
		b.WriteByte('"')
	}
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }
func escapeHelp(v string) string  { return helpEscaper.Replace(v) }

// formatValue writes a sample's value as the text format reads it: the
// shortest exact decimal, and +Inf, -Inf and NaN by those names.
func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// histogram counts observations into fixed buckets. Observing is a binary
// search and two atomic adds (three with the sum's compare-and-swap): no
// lock, so requests on both cores never wait for each other here.
type histogram struct {
	bounds []float64       // upper bounds, ascending; +Inf is implied
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf's
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(bounds []float64) *histogram {
	if !sort.Float64sAreSorted(bounds) {
		panic("histogram bounds out of order")
	}
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// observe counts v in the first bucket whose bound is at least v.
func (h *histogram) observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// count is how many observations h holds.
func (h *histogram) count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// write writes h's series under name with labels ("" for none). The
// buckets are read once each and _count is their total, so one scrape's
// buckets rise to exactly its _count, even while observations arrive.
func (p *promText) histogram(name, labels string, h *histogram) {
	prefix := ""
	if labels != "" {
		prefix = labels + ","
	}
	var cumulative uint64
	for i, bound := range h.bounds {
		cumulative += h.counts[i].Load()
		p.sample(name+"_bucket", prefix+`le="`+formatValue(bound)+`"`, float64(cumulative))
	}
	cumulative += h.counts[len(h.bounds)].Load()
	p.sample(name+"_bucket", prefix+`le="+Inf"`, float64(cumulative))
	p.sample(name+"_sum", labels, math.Float64frombits(h.sum.Load()))
	p.sample(name+"_count", labels, float64(cumulative))
}

// Bucket bounds, in seconds (or jobs), spanning what each measures on a
// small server: a post is answered in a few milliseconds and committed in
// well under one; a long-poll is held up to a minute.
var (
	requestBuckets    = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	commitBuckets     = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	checkpointBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	jobsBuckets       = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)
