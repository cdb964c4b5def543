# dvm_check_sources_listed(FOLDERS <dir>... LISTED <file>...): fails the
# configure step when a .cpp under one of FOLDERS (relative to the calling
# CMakeLists.txt's directory, searched recursively) is missing from LISTED
# (paths relative to that same directory), so a new source file cannot be left
# out of the build by mistake. The sources themselves are listed by hand; this
# glob only checks the lists, and CONFIGURE_DEPENDS re-runs it when a file is
# added.
function(dvm_check_sources_listed)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "FOLDERS;LISTED")
  set(patterns)
  foreach(folder IN LISTS arg_FOLDERS)
    list(APPEND patterns ${CMAKE_CURRENT_SOURCE_DIR}/${folder}/*.cpp)
  endforeach()
  file(GLOB_RECURSE found CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}
       LIST_DIRECTORIES false ${patterns})
  set(missing)
  foreach(file IN LISTS found)
    if(NOT file IN_LIST arg_LISTED)
      list(APPEND missing ${file})
    endif()
  endforeach()
  if(missing)
    list(JOIN missing "\n  " text)
    message(FATAL_ERROR "dvm: these sources are in no source list of ${CMAKE_CURRENT_LIST_FILE}:\n  ${text}\n"
                        "Add each to the list of its folder there.")
  endif()
endfunction()
