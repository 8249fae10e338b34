package bench

import (
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

func TestStats(t *testing.T) {
	tests := []struct {
		in               []float64
		min, median, max float64
	}{
		{[]float64{3, 1, 2}, 1, 2, 3},
		{[]float64{4, 1, 3, 2}, 1, 2.5, 4},
		{[]float64{5}, 5, 5, 5},
		{nil, 0, 0, 0},
	}
	for _, tt := range tests {
		s := stats("p", tt.in)
		if s.Min != tt.min || s.Median != tt.median || s.Max != tt.max {
			t.Errorf("stats(%v) = %v/%v/%v, want %v/%v/%v", tt.in, s.Min, s.Median, s.Max, tt.min, tt.median, tt.max)
		}
	}
}

func TestCollect(t *testing.T) {
	run := &reports.Run{
		Timings: []reports.Timing{{Phase: "cluster up", Duration: 5 * time.Second}, {Phase: "whole run", Duration: 25 * time.Second}},
		Hops: []reports.Hop{
			{Timings: []reports.Timing{{Phase: "node Ready", Duration: 500 * time.Millisecond}, {Phase: "old pod dirs gone", Duration: 4 * time.Second}}},
			{Timings: []reports.Timing{{Phase: "node Ready", Duration: 700 * time.Millisecond}}},
		},
	}
	samples := map[string][]float64{}
	collect(samples, run)
	want := map[string][]float64{
		"bring-up":          {5},
		"whole round":       {25},
		"swap to Ready":     {0.5, 0.7},
		"old pod dirs gone": {4},
	}
	if !reflect.DeepEqual(samples, want) {
		t.Fatalf("collect = %v, want %v", samples, want)
	}
}
