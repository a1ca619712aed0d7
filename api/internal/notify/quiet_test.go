package notify_test

import (
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/notify"
)

func TestQuietUntil(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	night, err := notify.ParseQuiet("22:00", "07:00", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	lunch, err := notify.ParseQuiet("12:00", "13:30", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	at := func(loc *time.Location, mo time.Month, d, h, m int) time.Time {
		return time.Date(2026, mo, d, h, m, 0, 0, loc)
	}
	for _, c := range []struct {
		name string
		q    notify.Quiet
		t    time.Time
		end  time.Time
		in   bool
	}{
		{"before midnight", night, at(berlin, 3, 10, 23, 30), at(berlin, 3, 11, 7, 0), true},
		{"after midnight", night, at(berlin, 3, 11, 3, 0), at(berlin, 3, 11, 7, 0), true},
		{"at the start", night, at(berlin, 3, 10, 22, 0), at(berlin, 3, 11, 7, 0), true},
		{"at the end", night, at(berlin, 3, 11, 7, 0), time.Time{}, false},
		{"daytime", night, at(berlin, 3, 11, 12, 0), time.Time{}, false},
		// The clocks go forward at 02:00 on 29 March 2026 in Berlin; the window still ends at 07:00.
		{"across a clock change", night, at(berlin, 3, 28, 23, 0), at(berlin, 3, 29, 7, 0), true},
		{"another zone", night, time.Date(2026, 3, 10, 21, 30, 0, 0, time.UTC), at(berlin, 3, 11, 7, 0), true},
		{"same-day window", lunch, at(time.UTC, 6, 1, 12, 15), at(time.UTC, 6, 1, 13, 30), true},
		{"outside it", lunch, at(time.UTC, 6, 1, 13, 30), time.Time{}, false},
	} {
		end, in := c.q.Until(c.t)
		if in != c.in || !end.Equal(c.end) {
			t.Errorf("%s: %s, %v; want %s, %v", c.name, end, in, c.end, c.in)
		}
	}
	for _, bad := range [][3]string{{"25:00", "07:00", "UTC"}, {"22:00", "7", "UTC"}, {"22:00", "22:00", "UTC"},
		{"22:00", "07:00", "Mars/Olympus"}, {"22:00", "07:00", "Local"}} {
		if _, err := notify.ParseQuiet(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
