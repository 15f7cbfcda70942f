# SPDX-License-Identifier: Apache-2.0
# softmax.pc. The prefix is found from where the file lies (${pcfiledir}), so the file stays right
# when the installed tree is moved or unpacked elsewhere (a package extracted with dpkg -x, a
# wheel). How many folders to climb is computed from CMAKE_INSTALL_LIBDIR, which is one folder
# deep on most systems ("lib") and two on Debian ("lib/x86_64-linux-gnu"). Absolute install dirs
# are written as they are.

function(softmax_write_pkgconfig output)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(pc_prefix "${CMAKE_INSTALL_PREFIX}")
  else()
    # From <prefix>/<libdir>/pkgconfig back up to <prefix>: "../.." or "../../..".
    file(RELATIVE_PATH up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
    string(REGEX REPLACE "/+$" "" up "${up}")
    set(pc_prefix "\${pcfiledir}/${up}")
  endif()
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(pc_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(pc_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/softmax.pc.in ${output} @ONLY)
endfunction()
