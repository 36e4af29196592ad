package rdmabench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// WriteTable prints the result as two tables.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\tpayload B\toutstanding\tp50 µs\tp99 µs\tmsgs/s\t")
	for _, c := range r.RTT {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.0f\t\n", c.Transport, c.Payload, c.Outstanding, c.P50us, c.P99us, c.MsgsPerSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Stream) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "one-sided WRITE stream\tGiB\tGB/s\twriter CPU s\tpeer CPU s\tpeer/writer\t")
	for _, s := range r.Stream {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.3f\t%.4f\t%.2f%%\t\n", s.Transport, float64(s.Bytes)/(1<<30),
			float64(s.Bytes)/s.Seconds/1e9, s.WriterCPU, s.PeerCPU, 100*s.PeerPerCPU)
	}
	return tw.Flush()
}

// WriteJSONFile writes the result as JSON.
func (r *Result) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
