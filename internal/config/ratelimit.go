package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// RateLimit is a GCRA limit: Rate events per Period, with bursts of up to Burst. Off disables
// the limit. The zero value is not a limit; see Off.
type RateLimit struct {
	Rate   int
	Burst  int
	Period time.Duration
	Off    bool
}

// String writes the limit as it is configured ("10/s burst 20", "off").
func (l RateLimit) String() string {
	if l.Off {
		return "off"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[l.Period]
	return fmt.Sprintf("%d/%s burst %d", l.Rate, unit, l.Burst)
}

var rateSpec = regexp.MustCompile(`^(\d+)\s*/\s*(s|m|h)(?:\s+burst\s+(\d+))?$`)

// ParseRateLimit reads "10/s burst 20" (per second, minute or hour; the burst defaults to the
// rate) or "off".
func ParseRateLimit(s string) (RateLimit, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "off" {
		return RateLimit{Off: true}, nil
	}
	m := rateSpec.FindStringSubmatch(s)
	if m == nil {
		return RateLimit{}, fmt.Errorf(`must look like "10/s burst 20" (per s, m or h) or "off"`)
	}
	rate, err := strconv.Atoi(m[1])
	if err != nil || rate < 1 || rate > 1_000_000 {
		return RateLimit{}, fmt.Errorf("the rate must be 1 to 1000000")
	}
	burst := rate
	if m[3] != "" {
		if burst, err = strconv.Atoi(m[3]); err != nil || burst < 1 || burst > 1_000_000 {
			return RateLimit{}, fmt.Errorf("the burst must be 1 to 1000000")
		}
	}
	period := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return RateLimit{Rate: rate, Burst: burst, Period: period}, nil
}

// ParseRateLimits reads limits per tenant plan: entries separated by ";", each "plan=LIMIT" or
// a bare LIMIT that applies to every plan not named (the "" key). An empty string is no
// override (nil).
func ParseRateLimits(s string) (map[string]RateLimit, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]RateLimit{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		plan, spec, named := strings.Cut(entry, "=")
		if !named {
			plan, spec = "", entry
		}
		l, err := ParseRateLimit(spec)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		out[strings.TrimSpace(plan)] = l
	}
	return out, nil
}
