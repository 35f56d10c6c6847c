package testutil

import (
	"slices"
	"testing"
	"time"
)

// SideBySide measures ours beside peer in one benchmark run, the way
// every start-up figure here is taken on a noisy shared machine: one
// warm-up of each (images, page cache), then b.N rounds alternating
// peer and ours, timed by run(name). It reports both medians in ms per
// unit ("<peer>-ms/<unit>", "<ours>-ms/<unit>") and their ratio
// ("<ours>/<peer>"), which is the figure to read.
func SideBySide(b *testing.B, peer, ours, unit string, run func(name string) time.Duration) {
	b.Helper()
	run(peer)
	run(ours)
	var ps, os []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ps = append(ps, run(peer))
		os = append(os, run(ours))
	}
	b.StopTimer()
	mp, mo := median(ps), median(os)
	b.ReportMetric(float64(mp.Microseconds())/1000, peer+"-ms/"+unit)
	b.ReportMetric(float64(mo.Microseconds())/1000, ours+"-ms/"+unit)
	b.ReportMetric(float64(mo)/float64(mp), ours+"/"+peer)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
