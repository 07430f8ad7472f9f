# cmake -DIN=file -DOUT=file.inc -P embed_text.cmake: OUT holds IN as a C++ raw string literal
# (the dashboard page, compiled into the server; no file is read at run time).
file(READ ${IN} content)
string(FIND "${content}" ")STRATA_EMBED\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string's delimiter")
endif()
file(WRITE ${OUT}.tmp "R\"STRATA_EMBED(${content})STRATA_EMBED\"\n")
file(RENAME ${OUT}.tmp ${OUT})
