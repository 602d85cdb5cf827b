package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// groupDigits renders n with thousands separators: totals are read at a
// glance during a drill, and 12,345,678 is faster to read than 12345678.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	lead := len(s) % 3
	if lead == 0 {
		lead = 3
	}
	b.WriteString(s[:lead])
	for i := lead; i < len(s); i += 3 {
		b.WriteByte(',')
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// compactCount fits a record count in seven cells: exact below 100,000,
// then k/M/G.
func compactCount(n int64) string {
	switch {
	case n < 100_000:
		return groupDigits(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2fG", float64(n)/1e9)
}

// offset renders an offset exactly (operators compare it with --describe);
// negative values mean "unknown".
func offset(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// epoch renders a leader epoch; negative means unknown.
func epoch(n int32) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(int64(n), 10)
}

// lme renders the last mirrored epoch and offset as "epoch:offset", the pair
// failback compares against.
func lme(e int32, off int64) string {
	if off < 0 {
		return "-"
	}
	return epoch(e) + ":" + strconv.FormatInt(off, 10)
}

// duration renders a lag or retry delay compactly and without a clock.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// byteRate renders bytes per second with a decimal unit.
func byteRate(bps float64) string {
	switch {
	case bps <= 0:
		return "0 B/s"
	case bps < 1e3:
		return fmt.Sprintf("%.0f B/s", bps)
	case bps < 1e6:
		return fmt.Sprintf("%.1f kB/s", bps/1e3)
	case bps < 1e9:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	}
	return fmt.Sprintf("%.1f GB/s", bps/1e9)
}

// recordRate renders records per second in as few columns as byteRate.
// rate is the byte rate an instance counts, or for an observer (which
// sees offsets grow, not the bytes an instance copies) the record rate.
func rate(observer bool, bps, rps float64) string {
	if observer {
		return recordRate(rps)
	}
	return byteRate(bps)
}

func recordRate(rps float64) string {
	switch {
	case rps < 1e3:
		return fmt.Sprintf("%.0f rec/s", rps)
	case rps < 1e6:
		return fmt.Sprintf("%.1fk rec/s", rps/1e3)
	}
	return fmt.Sprintf("%.1fM rec/s", rps/1e6)
}

// byteSize renders a byte count with a decimal unit.
func byteSize(n int64) string {
	f := float64(n)
	switch {
	case n < 1e3:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", f/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", f/1e6)
	case n < 1e12:
		return fmt.Sprintf("%.1f GB", f/1e9)
	}
	return fmt.Sprintf("%.1f TB", f/1e12)
}

// fit pads or truncates plain text s to exactly w cells. Truncation ends in
// "…" so a cut value never passes for a whole one.
func fit(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", w-sw)
	if right {
		return pad + s
	}
	return s + pad
}

// block makes s exactly w×h cells: longer lines are cut, missing lines and
// columns are blank. Sections are assembled by line count, so every view
// returns a block of its exact size.
func block(s string, w, h int) string {
	if h <= 0 || w <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	var b strings.Builder
	for i := 0; i < h; i++ {
		if i > 0 {
			b.WriteByte('\n')
		}
		var l string
		if i < len(lines) {
			l = lines[i]
		}
		lw := ansi.StringWidth(l)
		if lw > w {
			l = ansi.Truncate(l, w, "")
			lw = ansi.StringWidth(l)
		}
		b.WriteString(l)
		b.WriteString(strings.Repeat(" ", w-lw))
	}
	return b.String()
}

// Block is block for the root model, which assembles the screen the same way.
func Block(s string, w, h int) string { return block(s, w, h) }

// clock renders an event or snapshot time; times are shown in UTC so every
// operator on the drill call reads the same value.
func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.UTC().Format("15:04:05")
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa32(n int32) string { return strconv.FormatInt(int64(n), 10) }
