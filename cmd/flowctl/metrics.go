package main

import (
	"github.com/spf13/cobra"

	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// series is one sample of the collector's Prometheus endpoint.
type series struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// The summary rows (like antctl get recordmetrics): name → what to add up.
// Names are matched on their end so that the unit or prefix the collector's
// telemetry adds does not matter.
var summary = []struct{ row, suffix string }{
	{"records received", "receiver_accepted_log_records"},
	{"records refused by receivers", "receiver_refused_log_records"},
	{"records exported", "exporter_sent_log_records"},
	{"records failed to export", "exporter_send_failed_log_records"},
	{"records pending correlation", "records_pending"},
	{"connections held", "connections_held"},
	{"flow stream: records buffered", "flow_stream_records_buffered"},
	{"flow stream: records lost by slow streams", "flow_stream_records_dropped"},
	{"flow stream: open streams", "flow_stream_streams"},
}

// metrics prints the record counters of a collector's own telemetry.
func metricsCommand() *cobra.Command {
	cmd := newCommand("metrics", "print a collector's record counters (received, exported, dropped, pending)")
	fs := cmd.Flags()
	url := fs.String("url", "http://127.0.0.1:8888/metrics", "the collector's Prometheus telemetry endpoint (kubectl port-forward to port 8888 of a gateway)")
	output := fs.StringP("output", "o", "table", "output: table or json")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		if *output != "table" && *output != "json" {
			return fmt.Errorf("-o: %q is not table or json", *output)
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		if err != nil {
			return fmt.Errorf("--url: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("reading %s: %w (is the collector's telemetry reachable?)", *url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("reading %s: %s", *url, resp.Status)
		}
		all, err := parseExposition(resp.Body)
		if err != nil {
			return fmt.Errorf("reading %s: %w", *url, err)
		}
		rows := map[string]float64{}
		var order []string
		for _, s := range summary {
			var sum float64
			found := false
			for _, x := range all {
				if strings.HasSuffix(x.Name, s.suffix) {
					sum += x.Value
					found = true
				}
			}
			if found {
				rows[s.row] = sum
				order = append(order, s.row)
			}
		}
		var flowtel []series
		for _, x := range all {
			if strings.Contains(x.Name, "flow") {
				flowtel = append(flowtel, x)
			}
		}
		if *output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"summary": rows, "series": flowtel})
		}
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		for _, r := range order {
			fmt.Fprintf(tw, "%s\t%s\n", r, strconv.FormatFloat(rows[r], 'f', -1, 64))
		}
		if len(flowtel) > 0 {
			fmt.Fprintln(tw, "\nSERIES\tVALUE")
			for _, x := range flowtel {
				fmt.Fprintf(tw, "%s%s\t%s\n", x.Name, labelText(x.Labels), strconv.FormatFloat(x.Value, 'f', -1, 64))
			}
		}
		return tw.Flush()
	})
}

func labelText(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		if k != "otel_scope_name" && k != "otel_scope_version" && k != "otel_scope_schema_url" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// parseExposition reads the Prometheus text exposition format: one sample
// per line, `name{label="value",...} value [timestamp]`, comments ignored.
func parseExposition(r io.Reader) ([]series, error) {
	var out []series
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := series{}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.Name = line[:i]
			end := strings.LastIndex(line, "}")
			if end < i {
				return nil, fmt.Errorf("line %d: unterminated labels", n)
			}
			labels, err := parseLabels(line[i+1 : end])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			s.Labels = labels
			rest = strings.TrimSpace(line[end+1:])
		} else {
			name, value, ok := strings.Cut(line, " ")
			if !ok {
				return nil, fmt.Errorf("line %d: no value", n)
			}
			s.Name, rest = name, strings.TrimSpace(value)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d: no value", n)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value %q: %w", n, fields[0], err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		name, rest, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("label %q without a value", s)
		}
		v, tail, err := quotedPrefix(strings.TrimSpace(rest))
		if err != nil {
			return nil, err
		}
		out[strings.TrimSpace(name)] = v
		s = strings.TrimPrefix(strings.TrimSpace(tail), ",")
		s = strings.TrimSpace(s)
	}
	return out, nil
}

func quotedPrefix(s string) (value, rest string, err error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", fmt.Errorf("label value %q: %w", s, err)
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}
