package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/airlock-dev/airlock/images"
)

// progress shows a pull, import or build: at a terminal one line redrawn
// in place (layers done, bytes, a bar), elsewhere one line per layer
// finished (what a log or CI wants), nothing with quiet.
type progress struct {
	w      io.Writer
	what   string
	tty    bool
	quiet  bool
	mu     sync.Mutex
	layers map[string]*images.Progress
	order  []string
	last   time.Time
	drawn  bool
}

func newProgress(w io.Writer, what string, quiet bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, what: what, tty: tty, quiet: quiet, layers: map[string]*images.Progress{}}
}

// report takes one update (safe from any goroutine).
func (p *progress) report(u images.Progress) {
	if p.quiet || u.Layer == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.layers[u.Layer]
	if !ok {
		l = &images.Progress{Layer: u.Layer}
		p.layers[u.Layer] = l
		p.order = append(p.order, u.Layer)
	}
	prev := l.Phase
	*l = u
	if !p.tty {
		if u.Phase == images.PhaseDone && prev != images.PhaseDone || u.Phase == images.PhaseExists && prev == "" {
			state := "downloaded and unpacked"
			if u.Phase == images.PhaseExists {
				state = "already in the store"
			}
			fmt.Fprintf(p.w, "%s: layer %s %s (%s)\n", p.what, short(u.Layer), state, humanBytes(u.Total))
		}
		return
	}
	if time.Since(p.last) < 100*time.Millisecond && u.Phase == images.PhaseDownload {
		return
	}
	p.last = time.Now()
	p.draw()
}

func (p *progress) draw() {
	var done, total int64
	finished := 0
	for _, k := range p.order {
		l := p.layers[k]
		done += l.Done
		total += l.Total
		if l.Phase == images.PhaseDone || l.Phase == images.PhaseExists {
			finished++
		}
	}
	const width = 24
	fill := 0
	if total > 0 {
		fill = int(float64(width) * float64(done) / float64(total))
	}
	bar := strings.Repeat("=", min(fill, width)) + strings.Repeat(" ", width-min(fill, width))
	fmt.Fprintf(p.w, "\r\033[K%s [%s] %d/%d layers, %s/%s", p.what, bar, finished, len(p.order), humanBytes(done), humanBytes(total))
	p.drawn = true
}

// finish ends the display.
func (p *progress) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		p.draw()
		fmt.Fprintln(p.w)
	}
}

func short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}
