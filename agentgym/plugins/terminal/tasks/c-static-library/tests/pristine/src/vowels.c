#include <string.h>

#include "strutil.h"

size_t su_vowels(const char *s) {
    size_t n = 0;
    for (; *s; s++) {
        if (strchr("aeiouAEIOU", *s) != NULL) {
            n++;
        }
    }
    return n;
}
