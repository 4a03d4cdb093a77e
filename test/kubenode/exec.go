package kubenode

import "os/exec"

// execOutput runs bin and returns its combined output.
func execOutput(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}
