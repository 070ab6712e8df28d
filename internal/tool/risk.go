package tool

import (
	"encoding/json"
	"path"
	"strings"

	"github.com/agentry/agentry/internal/workspace"
)

// Risk scores of the built-in tools, 0-100. The executor asks for approval when a call scores
// above the user's approvalThreshold (with autoExecute on), so the numbers order calls by how
// much harm a mistaken call could do.
//
// Base scores:
//
//	list_files     0  names and sizes only
//	read_file      5  reads one file into the model's context
//	search_files   5  reads matching lines into the model's context
//	edit_file     35  changes part of one file; the rest stays
//	write_file    40  creates or replaces a whole file
//	delete_file   70  removes a file (back only from a snapshot)
//
// The path argument (path for file tools, path_prefix for search_files) then adds, by the most
// sensitive class it falls in (PathSensitivity), clamped to 100:
//
//	class        change (write, edit, delete)   read (read, search)
//	secret       +30                            +20 (the secret would reach the model)
//	vcs          +25                            0
//	automation   +15                            0
//
// so writing ".env" scores 70, deleting "id_rsa" 100 and reading ".env" 25. list_files always
// scores 0. Arguments a tool cannot read (not JSON, wrong types, a path that will be refused)
// score as if the path were a secret: the call will be refused anyway, and no reading of
// arguments may lower a score below what the call could be.
const (
	riskListFiles   = 0
	riskReadFile    = 5
	riskSearchFiles = 5
	riskEditFile    = 35
	riskWriteFile   = 40
	riskDeleteFile  = 70
)

// Sensitivity classifies a workspace path by the harm a change to it could do.
type Sensitivity int

// Sensitivity classes, least sensitive first. The zero value is Ordinary.
const (
	// Ordinary is every path not listed below.
	Ordinary Sensitivity = iota
	// Automation is configuration that makes other systems run code: CI workflows and commit
	// hooks (".github/", ".gitlab-ci.yml", ".gitlab/", ".circleci/", "Jenkinsfile", ".husky/",
	// ".pre-commit-config.yaml").
	Automation
	// VCS is version-control internals, whose hooks run code and whose history people trust
	// (anything under or named ".git", ".hg", ".svn").
	VCS
	// Secret is a file that usually holds credentials: ".env" and ".env.*", keys and
	// certificates ("*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
	// "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*"), credential files (".npmrc", ".pypirc",
	// ".netrc", ".pgpass", ".htpasswd", "credentials", "credentials.*",
	// "secrets.*", "*.tfvars", "*.tfstate") and anything under ".ssh", ".aws", ".gnupg",
	// ".kube" or ".docker".
	Secret
)

var (
	secretDirs = []string{".ssh", ".aws", ".gnupg", ".kube", ".docker"}
	secretName = []string{
		".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
		"id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
		".npmrc", ".pypirc", ".netrc", ".pgpass", ".htpasswd",
		"credentials", "credentials.*", "secrets.*", "*.tfvars", "*.tfstate",
	}
	vcsDirs         = []string{".git", ".hg", ".svn"}
	automationDirs  = []string{".github", ".gitlab", ".circleci", ".husky"}
	automationNames = []string{".gitlab-ci.yml", "jenkinsfile", ".pre-commit-config.yaml"}
)

// PathSensitivity classifies a normalised workspace path (or prefix), ignoring case: names
// are matched as on a case-insensitive file system, so ".ENV" is a secret too.
func PathSensitivity(p string) Sensitivity {
	p = strings.ToLower(p)
	if p == "" {
		return Ordinary
	}
	segs := strings.Split(p, "/")
	base := segs[len(segs)-1]
	has := func(names []string) bool {
		for _, s := range segs {
			for _, n := range names {
				if s == n {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has(secretDirs) || matchAny(secretName, base):
		return Secret
	case has(vcsDirs):
		return VCS
	case has(automationDirs) || matchAny(automationNames, base):
		return Automation
	}
	return Ordinary
}

func matchAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// changeRisk scores a write, edit or delete of the path found in args under key.
func changeRisk(base int, args json.RawMessage, key string) int {
	add := map[Sensitivity]int{Ordinary: 0, Automation: 15, VCS: 25, Secret: 30}
	return clampRisk(base + add[argSensitivity(args, key, false)])
}

// readRisk scores a read or search of the path (or prefix) found in args under key.
func readRisk(base int, args json.RawMessage, key string, prefix bool) int {
	if argSensitivity(args, key, prefix) == Secret {
		return clampRisk(base + 20)
	}
	return base
}

// argSensitivity classifies the path in args[key]; arguments that cannot be read are Secret.
func argSensitivity(args json.RawMessage, key string, prefix bool) Sensitivity {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return Secret
	}
	var raw string
	if v, ok := m[key]; ok {
		if err := json.Unmarshal(v, &raw); err != nil {
			return Secret
		}
	} else if !prefix {
		return Secret
	}
	norm := workspace.NormalizePath
	if prefix {
		norm = workspace.NormalizePrefix
	}
	p, err := norm(raw)
	if err != nil {
		return Secret
	}
	return PathSensitivity(p)
}

func clampRisk(n int) int { return max(0, min(100, n)) }
