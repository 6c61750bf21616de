"""cuBLAS's and cuBLASLt's ctypes layers: declarations, enums, status texts; no policy, and nothing of the
package imported."""
