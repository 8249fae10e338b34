package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// WriteJSON writes the run as indented JSON. The output is stable: fields
// come in declaration order and nothing depends on map order. HTML
// characters are not escaped, so paths like /var/lib/kubelet/pods/<uid>
// stay readable.
func WriteJSON(w io.Writer, run *Run) error {
	if run == nil {
		return errors.New("reports: nil run")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(run); err != nil {
		return fmt.Errorf("reports: encoding run: %w", err)
	}
	return nil
}

// ReadJSON reads a run written by WriteJSON.
func ReadJSON(r io.Reader) (*Run, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reports: reading run: %w", err)
	}
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("reports: decoding run: %w", err)
	}
	return &run, nil
}

// metricFields is Metric without its JSON methods.
type metricFields Metric

// MarshalJSON encodes a metric as its fields, except that a value JSON
// numbers cannot hold (NaN, ±Inf, which Prometheus gauges can report) is
// written as the string "NaN", "+Inf" or "-Inf" instead of failing the
// whole run's encoding.
func (m Metric) MarshalJSON() ([]byte, error) {
	var v any = metricFields(m)
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		v = struct {
			metricFields
			Value string `json:"value"`
		}{metricFields(m), strconv.FormatFloat(m.Value, 'g', -1, 64)}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// UnmarshalJSON accepts the value as a number or as one of the strings
// MarshalJSON writes for non-finite values.
func (m *Metric) UnmarshalJSON(data []byte) error {
	var aux struct {
		metricFields
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*m = Metric(aux.metricFields)
	raw := bytes.TrimSpace(aux.Value)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		m.Value = 0
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("metric %q: value %q: %w", m.Name, s, err)
		}
		m.Value = f
	default:
		if err := json.Unmarshal(raw, &m.Value); err != nil {
			return fmt.Errorf("metric %q: value: %w", m.Name, err)
		}
	}
	return nil
}
