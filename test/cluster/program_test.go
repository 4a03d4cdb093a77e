package cluster

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

func TestRunProgram(t *testing.T) {
	tests := []struct {
		name      string
		fn        func(p *Program, ran *[]string)
		wantRan   []string
		wantError string
	}{
		{
			name: "cleanups run last first after fn returns",
			fn: func(p *Program, ran *[]string) {
				p.Cleanup(func() { *ran = append(*ran, "first") })
				p.Cleanup(func() { *ran = append(*ran, "second") })
				*ran = append(*ran, "fn")
			},
			wantRan: []string{"fn", "second", "first"},
		},
		{
			name: "Fatalf ends fn, runs the cleanups and is the error",
			fn: func(p *Program, ran *[]string) {
				p.Cleanup(func() { *ran = append(*ran, "cleanup") })
				p.Fatalf("broken %d", 7)
				*ran = append(*ran, "after Fatalf")
			},
			wantRan:   []string{"cleanup"},
			wantError: "broken 7",
		},
		{
			name: "Errorf goes on and is the error",
			fn: func(p *Program, ran *[]string) {
				p.Errorf("soft")
				*ran = append(*ran, "after Errorf")
			},
			wantRan:   []string{"after Errorf"},
			wantError: "soft",
		},
		{
			name: "a cleanup that calls Fatal does not stop the others",
			fn: func(p *Program, ran *[]string) {
				p.Cleanup(func() { *ran = append(*ran, "earlier") })
				p.Cleanup(func() { p.Fatal("cleanup failed") })
			},
			wantRan:   []string{"earlier"},
			wantError: "cleanup failed",
		},
		{
			name: "a cleanup registered by a cleanup runs too",
			fn: func(p *Program, ran *[]string) {
				p.Cleanup(func() { p.Cleanup(func() { *ran = append(*ran, "nested") }) })
			},
			wantRan: []string{"nested"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			var log bytes.Buffer
			err := RunProgram(context.Background(), &log, func(p *Program) { tt.fn(p, &ran) })
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("ran %v, want %v", ran, tt.wantRan)
			}
			switch {
			case tt.wantError == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
				t.Errorf("error %v, want one with %q", err, tt.wantError)
			case tt.wantError != "" && !strings.Contains(log.String(), tt.wantError):
				t.Errorf("log %q does not say %q", log.String(), tt.wantError)
			}
		})
	}
}

func TestRunProgramRepanicsOtherPanicsAfterCleaningUp(t *testing.T) {
	cleaned := false
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want boom", r)
		}
		if !cleaned {
			t.Error("the cleanup did not run")
		}
	}()
	_ = RunProgram(context.Background(), &bytes.Buffer{}, func(p *Program) {
		p.Cleanup(func() { cleaned = true })
		panic("boom")
	})
}
