package cni

import (
	"encoding/json"
	"testing"
)

// FuzzParseNetConf: any stdin yields a config or a CNI error with a
// message, never a panic, and an accepted config round-trips.
func FuzzParseNetConf(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"nodenet","type":"nodenet-cni","socketPath":"/var/run/nodenet/cni.sock"}`,
		`{"cniVersion":"0.3.1","name":"n","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"udp","hostIP":"192.168.1.11"}],"dns":{"servers":["10.96.0.10"]}}}`,
		`{"cniVersion":"1.0.0","name":"n","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.244.1.3/24","gateway":"10.244.1.1","interface":0}]}}`,
		`{"cniVersion":"1.1.0","name":"n","cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}]}`,
		`{"cniVersion":"9.9.9"}`, `{`, ``, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := ParseNetConf(data)
		if err != nil {
			if err.Code == 0 || err.Msg == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			return
		}
		if conf.Name == "" || conf.CNIVersion == "" {
			t.Fatalf("accepted a config without name or version: %s", data)
		}
		again, merr := json.Marshal(conf)
		if merr != nil {
			t.Fatalf("accepted config does not encode: %v", merr)
		}
		if _, err := ParseNetConf(again); err != nil {
			t.Fatalf("accepted config does not parse again: %v\n%s", err, again)
		}
	})
}
