package views

import (
	"testing"
	"time"
)

func TestFormatting(t *testing.T) {
	cases := []struct{ got, want string }{
		{groupDigits(0), "0"},
		{groupDigits(999), "999"},
		{groupDigits(1000), "1,000"},
		{groupDigits(1529655), "1,529,655"},
		{groupDigits(-12345), "-12,345"},
		{compactCount(99_999), "99,999"},
		{compactCount(152_000), "152.0k"},
		{compactCount(1_521_555), "1.52M"},
		{compactCount(3_000_000_000), "3.00G"},
		{offset(-1), "-"},
		{offset(1520120), "1520120"},
		{lme(7, 1515919), "7:1515919"},
		{lme(-1, -1), "-"},
		{duration(0), "0s"},
		{duration(40 * time.Millisecond), "40ms"},
		{duration(4 * time.Second), "4.0s"},
		{duration(36 * time.Second), "36s"},
		{duration(84 * time.Second), "1m24s"},
		{duration(3*time.Hour + 5*time.Minute), "3h05m"},
		{duration(50 * time.Hour), "2d02h"},
		{byteRate(0), "0 B/s"},
		{byteRate(250_000), "250.0 kB/s"},
		{byteRate(3e6), "3.0 MB/s"},
		{byteSize(778_300_000), "778.3 MB"},
		{fit("abcdef", 4, false), "abc…"},
		{fit("ab", 4, true), "  ab"},
		{fit("ab", 4, false), "ab  "},
		{clock(time.Date(2025, 3, 14, 12, 0, 5, 0, time.FixedZone("X", 3600))), "11:00:05"},
		{clock(time.Time{}), "--:--:--"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
	}
}

func TestBlockIsExactlyTheSizeAsked(t *testing.T) {
	out := block("a\nlonger line here\n", 6, 4)
	want := "a     \nlonger\n      \n      "
	if out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
