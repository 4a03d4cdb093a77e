package hns

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// docs/hns-versions.md's release table says what the code does: each
// modelled release has a row whose feature and backend-limit cells are
// FeaturesFor's and MaxBackendsPerLoadBalancer's.
func TestHNSVersionsDocAgreesWithTheCode(t *testing.T) {
	data, err := os.ReadFile("../docs/hns-versions.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[Version][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 11 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if v, err := ParseVersion(cells[0]); err == nil {
			rows[v] = cells
		}
	}
	yes := map[bool]string{true: "yes", false: "no"}
	for _, r := range Releases {
		t.Run(r.Name, func(t *testing.T) {
			cells, ok := rows[r.Version]
			if !ok {
				t.Fatalf("no row for HNS %s", r.Version)
			}
			f := FeaturesFor(r.Version)
			want := map[int]string{
				2: r.Build.String(), 3: yes[f.ModifyLoadbalancer], 4: yes[f.DSR], 5: yes[f.SessionAffinity],
				6: yes[f.IPv6DualStack], 7: yes[f.VxlanPort], 8: strconv.Itoa(MaxBackendsPerLoadBalancer(r.Build)),
			}
			if r.Build.Revision == 0 {
				want[2] = strconv.Itoa(r.Build.Number)
			}
			for col, w := range want {
				if cells[col] != w {
					t.Errorf("column %d says %q, the code %q", col+1, cells[col], w)
				}
			}
		})
	}
	if len(rows) != len(Releases) {
		t.Errorf("the table has %d rows, hns models %d releases", len(rows), len(Releases))
	}
}
