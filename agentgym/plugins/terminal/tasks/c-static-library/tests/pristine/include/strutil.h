#ifndef STRUTIL_H
#define STRUTIL_H

#include <stddef.h>

/* Reverses s in place and returns it. */
char *su_reverse(char *s);
/* Upper-cases the ASCII letters of s in place and returns it. */
char *su_upper(char *s);
/* Counts the vowels (a, e, i, o, u, either case) in s. */
size_t su_vowels(const char *s);

#endif
