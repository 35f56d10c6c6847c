package main

// previewScheme is the scheme of preview URLs: https when the server
// itself serves TLS (a proxy in front that terminates TLS is not seen).
func previewScheme(tlsCert string) string {
	if tlsCert != "" {
		return "https"
	}
	return "http"
}
