#include <stdio.h>
#include <string.h>

#include "strutil.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char buf[256];
        strncpy(buf, argv[i], sizeof buf - 1);
        buf[sizeof buf - 1] = '\0';
        size_t vowels = su_vowels(buf);
        printf("%s %zu\n", su_upper(su_reverse(buf)), vowels);
    }
    return 0;
}
