// libflashkit is built with hidden visibility; the public API (and the few internal
// functions the C++ tests and the Python binding call) are exported explicitly on their
// definitions with FLASHKIT_EXPORT.
#pragma once

#if defined(_WIN32)
#define FLASHKIT_EXPORT
#else
#define FLASHKIT_EXPORT __attribute__((visibility("default")))
#endif
