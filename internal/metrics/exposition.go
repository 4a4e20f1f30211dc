package metrics

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"strconv"
)

// ContentType is the media type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// writeEscaped writes s with \ as \\ and a newline as \n, and with quote
// also " as \": the escaping of HELP text and of label values.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// WriteText writes fs in the text exposition format 0.0.4: for each
// family a # HELP line, a # TYPE line, then one line per sample
// "name{l1="v1",…} value" (no braces without labels), each ending in \n.
// Values are written as integers when integral and below 2^53 in
// magnitude, else as Go's shortest 'g' form, +Inf, -Inf or NaN.
func WriteText(w io.Writer, fs []Family) error {
	bw := bufio.NewWriter(w)
	for _, f := range fs {
		bw.WriteString("# HELP ")
		bw.WriteString(f.Name)
		bw.WriteByte(' ')
		writeEscaped(bw, f.Help, false)
		bw.WriteString("\n# TYPE ")
		bw.WriteString(f.Name)
		bw.WriteByte(' ')
		bw.WriteString(string(f.Type))
		bw.WriteByte('\n')
		for _, s := range f.Samples {
			bw.WriteString(s.Name)
			if len(s.Labels) > 0 {
				bw.WriteByte('{')
				for i, l := range s.Labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(l.Name)
					bw.WriteString(`="`)
					writeEscaped(bw, l.Value, true)
					bw.WriteByte('"')
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(formatValue(s.Value))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// formatValue renders v as WriteText does.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Handler serves r's families in the text exposition format.
func Handler(r *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		WriteText(w, r.Gather())
	})
}
