package chat

import (
	"fmt"
	"strings"
	"time"
)

// strftime formats t as Python's time.strftime does on Linux (glibc, C
// locale), for the directives chat templates use: %a %A %b %B %c %d %D %e
// %F %H %I %j %m %M %p %S %T %u %w %x %X %y %Y %z %Z %%, with glibc's
// "-" flag (%-d: no padding). Unknown directives are written as they are.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		noPad := false
		if format[j] == '-' && j+1 < len(format) {
			noPad = true
			j++
		}
		num := func(v, width int) string {
			if noPad {
				return fmt.Sprint(v)
			}
			return fmt.Sprintf("%0*d", width, v)
		}
		var s string
		switch format[j] {
		case 'a':
			s = t.Format("Mon")
		case 'A':
			s = t.Format("Monday")
		case 'b', 'h':
			s = t.Format("Jan")
		case 'B':
			s = t.Format("January")
		case 'c':
			s = t.Format("Mon Jan _2 15:04:05 2006")
		case 'd':
			s = num(t.Day(), 2)
		case 'D':
			s = t.Format("01/02/06")
		case 'e':
			s = fmt.Sprintf("%2d", t.Day())
			if noPad {
				s = fmt.Sprint(t.Day())
			}
		case 'F':
			s = t.Format("2006-01-02")
		case 'H':
			s = num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			s = num(h, 2)
		case 'j':
			s = num(t.YearDay(), 3)
		case 'm':
			s = num(int(t.Month()), 2)
		case 'M':
			s = num(t.Minute(), 2)
		case 'p':
			s = t.Format("PM")
		case 'S':
			s = num(t.Second(), 2)
		case 'f':
			s = fmt.Sprintf("%06d", t.Nanosecond()/1000)
		case 'T':
			s = t.Format("15:04:05")
		case 'R':
			s = t.Format("15:04")
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			s = fmt.Sprint(wd)
		case 'w':
			s = fmt.Sprint(int(t.Weekday()))
		case 'x':
			s = t.Format("01/02/06")
		case 'X':
			s = t.Format("15:04:05")
		case 'y':
			s = num(t.Year()%100, 2)
		case 'Y':
			s = fmt.Sprint(t.Year())
		case 'z':
			s = t.Format("-0700")
		case 'Z':
			s = t.Format("MST")
		case '%':
			s = "%"
		default:
			s = format[i : j+1]
		}
		b.WriteString(s)
		i = j
	}
	return b.String()
}
