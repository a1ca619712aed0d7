package system

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// strftime formats t with the common date(1) conversions.
func strftime(format string, t time.Time) string {
	return cli.Expand(format, false, func(b *strings.Builder, c byte) bool {
		switch c {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			fmt.Fprintf(b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(b, "%02d", h)
		case 'M':
			fmt.Fprintf(b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(b, "%02d", t.Second())
		case 'N':
			fmt.Fprintf(b, "%09d", t.Nanosecond())
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			fmt.Fprintf(b, "%03d", t.YearDay())
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default:
			return false
		}
		return true
	})
}

func (m *Machine) date(_ context.Context, inv *shell.Invocation) int {
	t := m.now().UTC()
	format := "%a %b %e %H:%M:%S %Z %Y"
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "+"):
			format = a[1:]
		case a == "-u" || a == "--utc":
		case a == "-R" || a == "--rfc-email":
			format = "%a, %d %b %Y %H:%M:%S %z"
		case a == "-I" || strings.HasPrefix(a, "--iso-8601"):
			format = "%F"
			if strings.Contains(a, "seconds") {
				format = "%FT%H:%M:%S%:z"
			}
		case a == "-d" || a == "--date" || strings.HasPrefix(a, "--date="):
			v := strings.TrimPrefix(a, "--date=")
			if a == "-d" || a == "--date" {
				if i+1 >= len(args) {
					fmt.Fprintln(inv.Stderr, "date: option requires an argument -- 'd'")
					return 1
				}
				i++
				v = args[i]
			}
			parsed, ok := parseDateArg(v, t)
			if !ok {
				fmt.Fprintf(inv.Stderr, "date: invalid date '%s'\n", v)
				return 1
			}
			t = parsed.UTC()
		case a == "-r" && m.IsDarwin() && i+1 < len(args):
			i++
			if n, err := strconv.ParseInt(args[i], 10, 64); err == nil {
				t = time.Unix(n, 0).UTC()
			}
		}
	}
	format = strings.ReplaceAll(format, "%:z", "+00:00")
	fmt.Fprintln(inv.Stdout, strftime(format, t))
	return 0
}

func parseDateArg(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "@") {
		n, err := strconv.ParseInt(s[1:], 10, 64)
		return time.Unix(n, 0), err == nil
	}
	if s == "now" || s == "" {
		return now, true
	}
	f := strings.Fields(s)
	if len(f) >= 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			unit := strings.TrimSuffix(f[1], "s")
			d := map[string]time.Duration{"second": time.Second, "sec": time.Second, "minute": time.Minute, "min": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}[unit]
			if d != 0 {
				if len(f) == 3 && f[2] == "ago" {
					n = -n
				}
				return now.Add(time.Duration(n) * d), true
			}
		}
	}
	for _, l := range []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
