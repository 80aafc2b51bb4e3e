package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// phaseLine shows, on a terminal, what a plugin command is waiting for (the
// server checking and compiling a module, loading a Plugin) with the time
// spent so far, so that the command does not sit silent. On a pipe it
// writes nothing: scripts get the result lines on stdout and errors on
// stderr only.
type phaseLine struct {
	w     io.Writer // nil: not a terminal
	label string
	start time.Time

	mu   sync.Mutex
	done chan struct{}
	over bool
	// redraws, when drawing, is the goroutine that redraws the line; end
	// waits for it.
	redraws sync.WaitGroup
}

// startPhase draws label on stderr when it is a terminal and redraws it
// with the elapsed time until end is called.
func startPhase(stderr io.Writer, label string) *phaseLine {
	p := &phaseLine{label: label, start: time.Now(), done: make(chan struct{})}
	if !paletteFor(stderr).on {
		return p
	}
	p.w = stderr
	p.draw()
	p.redraws.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.mu.Lock()
				if !p.over {
					p.draw()
				}
				p.mu.Unlock()
			}
		}
	})
	return p
}

func (p *phaseLine) draw() {
	fmt.Fprintf(p.w, "\r%s ... %.1fs ", p.label, time.Since(p.start).Seconds())
}

// end ends the line with the outcome ("done", "failed") and the time taken.
// It may be called more than once; only the first call writes.
func (p *phaseLine) end(outcome string) {
	defer p.redraws.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.over {
		return
	}
	p.over = true
	close(p.done)
	if p.w != nil {
		fmt.Fprintf(p.w, "\r%s ... %s (%.1fs)\n", p.label, outcome, time.Since(p.start).Seconds())
	}
}
