package telecom

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// today is τ²'s fixed "today" for the telecom domain (utils.get_today):
// every suspension date, line-item date and billing cycle is computed from it,
// so results never depend on the wall clock.
var today = Date{Year: 2025, Month: 2, Day: 25}

// Date is a calendar date, the counterpart of Python's datetime.date. It
// prints as str(date) does ("2025-02-25"), which is how τ² serializes dates
// (json.dumps(default=str) and isoformat agree for dates).
type Date struct {
	Year, Month, Day int
}

// String formats the date as Python's str(date).
func (d Date) String() string {
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day)
}

// time converts to a UTC midnight time.Time for calendar arithmetic.
func (d Date) time() time.Time {
	return time.Date(d.Year, time.Month(d.Month), d.Day, 0, 0, 0, 0, time.UTC)
}

func dateOf(t time.Time) Date {
	return Date{Year: t.Year(), Month: int(t.Month()), Day: t.Day()}
}

// AddDays returns d shifted by n days (Python's date + timedelta(days=n)).
func (d Date) AddDays(n int) Date { return dateOf(d.time().AddDate(0, 0, n)) }

// WithDay returns d with the day of month replaced (Python's date.replace(day=…)).
func (d Date) WithDay(day int) Date { return Date{Year: d.Year, Month: d.Month, Day: day} }

// Less orders dates chronologically.
func (d Date) Less(o Date) bool {
	if d.Year != o.Year {
		return d.Year < o.Year
	}
	if d.Month != o.Month {
		return d.Month < o.Month
	}
	return d.Day < o.Day
}

// DateTime is the counterpart of a Python datetime.datetime field. τ²'s
// Customer.created_at defaults to a *date* (the default is not validated),
// so a DateTime can also hold a bare date (DateOnly) and then prints like one.
type DateTime struct {
	Date
	Hour, Minute, Second, Micro int
	// Offset is the UTC offset in seconds when HasOffset (an aware datetime).
	Offset    int
	HasOffset bool
	// DateOnly marks a value that is really a Python date (an unvalidated default).
	DateOnly bool
}

// String formats the value as Python's str(datetime) ("2025-01-20 14:30:00",
// with ".ffffff" when there are microseconds and "+HH:MM" when aware), or as
// str(date) when DateOnly.
func (t DateTime) String() string {
	if t.DateOnly {
		return t.Date.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %02d:%02d:%02d", t.Date.String(), t.Hour, t.Minute, t.Second)
	if t.Micro != 0 {
		fmt.Fprintf(&b, ".%06d", t.Micro)
	}
	if t.HasOffset {
		off := t.Offset
		sign := '+'
		if off < 0 {
			sign = '-'
			off = -off
		}
		fmt.Fprintf(&b, "%c%02d:%02d", sign, off/3600, off/60%60)
		if off%60 != 0 {
			fmt.Fprintf(&b, ":%02d", off%60)
		}
	}
	return b.String()
}

// parseDate accepts what pydantic accepts for a date field from a string in
// practice: "YYYY-MM-DD".
func parseDate(s string) (Date, error) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return Date{}, fmt.Errorf("input should be a valid date in the format YYYY-MM-DD, got %q", s)
	}
	y, err1 := strconv.Atoi(s[0:4])
	m, err2 := strconv.Atoi(s[5:7])
	d, err3 := strconv.Atoi(s[8:10])
	if err1 != nil || err2 != nil || err3 != nil {
		return Date{}, fmt.Errorf("input should be a valid date in the format YYYY-MM-DD, got %q", s)
	}
	if !validYMD(y, m, d) {
		return Date{}, fmt.Errorf("input should be a valid date, day value is outside expected range: %q", s)
	}
	return Date{Year: y, Month: m, Day: d}, nil
}

func validYMD(y, m, d int) bool {
	if y < 1 || m < 1 || m > 12 || d < 1 {
		return false
	}
	return d <= time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parseDateTime accepts ISO 8601 strings as pydantic does for datetime fields:
// "YYYY-MM-DD", "YYYY-MM-DDTHH:MM[:SS[.ffffff]]" (T or space), with an
// optional "Z" or "±HH:MM" offset.
func parseDateTime(s string) (DateTime, error) {
	bad := fmt.Errorf("input should be a valid datetime, got %q", s)
	if len(s) < 10 {
		return DateTime{}, bad
	}
	d, err := parseDate(s[:10])
	if err != nil {
		return DateTime{}, bad
	}
	out := DateTime{Date: d}
	rest := s[10:]
	if rest == "" {
		return out, nil
	}
	if rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ' {
		return DateTime{}, bad
	}
	rest = rest[1:]
	// Offset suffix.
	if strings.HasSuffix(rest, "Z") || strings.HasSuffix(rest, "z") {
		out.HasOffset = true
		rest = rest[:len(rest)-1]
	} else if i := strings.LastIndexAny(rest, "+-"); i > 0 {
		off := rest[i+1:]
		if len(off) != 5 || off[2] != ':' {
			return DateTime{}, bad
		}
		hh, e1 := strconv.Atoi(off[:2])
		mm, e2 := strconv.Atoi(off[3:])
		if e1 != nil || e2 != nil || hh > 23 || mm > 59 {
			return DateTime{}, bad
		}
		out.HasOffset = true
		out.Offset = hh*3600 + mm*60
		if rest[i] == '-' {
			out.Offset = -out.Offset
		}
		rest = rest[:i]
	}
	if len(rest) < 5 || rest[2] != ':' {
		return DateTime{}, bad
	}
	hh, e1 := strconv.Atoi(rest[:2])
	mi, e2 := strconv.Atoi(rest[3:5])
	if e1 != nil || e2 != nil || hh > 23 || mi > 59 {
		return DateTime{}, bad
	}
	out.Hour, out.Minute = hh, mi
	rest = rest[5:]
	if rest != "" {
		if rest[0] != ':' || len(rest) < 3 {
			return DateTime{}, bad
		}
		ss, err := strconv.Atoi(rest[1:3])
		if err != nil || ss > 59 {
			return DateTime{}, bad
		}
		out.Second = ss
		rest = rest[3:]
		if rest != "" {
			if rest[0] != '.' || len(rest) < 2 || len(rest) > 7 {
				return DateTime{}, bad
			}
			frac := rest[1:]
			for _, c := range frac {
				if c < '0' || c > '9' {
					return DateTime{}, bad
				}
			}
			frac += strings.Repeat("0", 6-len(frac))
			out.Micro, _ = strconv.Atoi(frac)
		}
	}
	return out, nil
}
