package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	// Quiet hours are local to a channel's time zone; the api's container image may carry no
	// zoneinfo, so the database is compiled in.
	_ "time/tzdata"
)

// Quiet is a channel's quiet hours: a daily window, local to Loc, during which nothing is
// sent; what falls due inside it is sent when it ends. Start after End crosses midnight
// (22:00-07:00).
type Quiet struct {
	Start, End time.Duration // since local midnight
	Loc        *time.Location
}

// parseClock reads "HH:MM" (24 h).
func parseClock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("%q is not a time of day: use HH:MM, 24 h (22:00)", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

// ParseQuiet reads a window ("22:00", "07:00") in the time zone tz (an IANA name; "" is UTC).
func ParseQuiet(start, end, tz string) (Quiet, error) {
	s, err := parseClock(start)
	if err != nil {
		return Quiet{}, err
	}
	e, err := parseClock(end)
	if err != nil {
		return Quiet{}, err
	}
	if s == e {
		return Quiet{}, fmt.Errorf("quiet hours %s-%s are empty: start and end must differ", start, end)
	}
	loc, err := loadZone(tz)
	if err != nil {
		return Quiet{}, err
	}
	return Quiet{Start: s, End: e, Loc: loc}, nil
}

func loadZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, fmt.Errorf("%q is not a time zone: use an IANA name such as Europe/Berlin or UTC", tz)
	}
	return loc, nil
}

// Until returns when the window that contains t ends, and whether t is inside one.
func (q Quiet) Until(t time.Time) (time.Time, bool) {
	lt := t.In(q.Loc)
	y, mo, d := lt.Date()
	// The wall clock, not the time elapsed since midnight: they differ on a day the clocks
	// change.
	tod := time.Duration(lt.Hour())*time.Hour + time.Duration(lt.Minute())*time.Minute +
		time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	at := func(dayOffset int, off time.Duration) time.Time {
		h, m := int(off/time.Hour), int(off%time.Hour/time.Minute)
		return time.Date(y, mo, d+dayOffset, h, m, 0, 0, q.Loc)
	}
	switch {
	case q.Start < q.End && tod >= q.Start && tod < q.End:
		return at(0, q.End), true
	case q.Start > q.End && tod >= q.Start:
		return at(1, q.End), true
	case q.Start > q.End && tod < q.End:
		return at(0, q.End), true
	}
	return time.Time{}, false
}
