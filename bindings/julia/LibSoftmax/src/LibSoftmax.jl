"""
    LibSoftmax

Row-wise softmax, log-softmax and fused softmax+dropout from libsoftmax's C ABI, through `@ccall`.

Julia is column-major and libsoftmax is row-major: a Julia matrix of size `(cols, rows)` lies in
memory exactly as the C matrix `[rows, cols]`. So every function here normalises along the
**first** dimension: each column of a `Matrix` is one softmax row (the same convention as
`NNlib.softmax(x; dims=1)`), and a `Vector` is a single row. No copy or transpose is made.

The library is found through the `SOFTMAX_LIBRARY` environment variable (a path to
`libsoftmax.so`) or, when that is unset, the system loader (`libsoftmax`).
CUDA arrays are handled by the `LibSoftmaxCUDAExt` extension, loaded with `using CUDA`.
"""
module LibSoftmax

using Libdl

export softmax, softmax!, logsoftmax, logsoftmax!, softmax_dropout, softmax_dropout!,
       SoftmaxError, libsoftmax_version, backend_available

const STATUS_SUCCESS = Cint(0)
const DTYPE = Dict{DataType,Cint}(Float32 => Cint(0), Float16 => Cint(1))
const BACKENDS = Dict(:auto => Cint(0), :cpu => Cint(1), :cuda => Cint(2))
const FLAG_LOG = UInt32(0x1)

"Element types the library stores: Float32 and Float16 (arithmetic is Float32 either way)."
const Element = Union{Float32,Float16}

"`softmax_options` from include/softmax/softmax.h (an isbits struct: C layout)."
struct Options
    struct_size::Csize_t
    backend::Cint
    flags::UInt32
    stream::Ptr{Cvoid}
    num_threads::Int32
end

"""
    SoftmaxError(status, name, message)

A libsoftmax call failed: `status` is the `softmax_status` code, `name` its
`softmax_status_string` ("SOFTMAX_STATUS_INVALID_SIZE") and `message` the call's
`softmax_last_error()` ("cols must be > 0, got 0").
"""
struct SoftmaxError <: Exception
    status::Int
    name::String
    message::String
end
Base.showerror(io::IO, e::SoftmaxError) = print(io, "SoftmaxError: ", e.name, ": ", e.message)

# Function pointers, resolved once the library is opened in __init__.
const FN = Dict{Symbol,Ptr{Cvoid}}()

function __init__()
    path = get(ENV, "SOFTMAX_LIBRARY", "")
    handle = Libdl.dlopen(isempty(path) ? "libsoftmax" : path; throw_error=false)
    if handle === nothing
        error("libsoftmax could not be loaded from ",
              isempty(path) ? "the system loader's path" : "SOFTMAX_LIBRARY=$path",
              "; set SOFTMAX_LIBRARY to the path of libsoftmax.so")
    end
    for name in (:softmax_rows, :softmax_dropout, :softmax_default_options,
                 :softmax_backend_available, :softmax_status_string, :softmax_last_error,
                 :softmax_version)
        FN[name] = Libdl.dlsym(handle, name)
    end
end

status_name(s::Integer) = unsafe_string(@ccall $(FN[:softmax_status_string])(s::Cint)::Cstring)

# Raises for a failed status, reading the thread's message right after the call.
function check(status::Cint)
    status == STATUS_SUCCESS && return nothing
    message = unsafe_string(@ccall $(FN[:softmax_last_error])()::Cstring)
    throw(SoftmaxError(Int(status), status_name(status), message))
end

"The loaded library's version, \"MAJOR.MINOR.PATCH\"."
libsoftmax_version() = unsafe_string(@ccall $(FN[:softmax_version])()::Cstring)

"Whether `backend` (`:auto`, `:cpu`, `:cuda`) can run on this machine now."
backend_available(backend::Symbol) =
    (@ccall $(FN[:softmax_backend_available])(backend_code(backend)::Cint)::Cint) != 0

function backend_code(backend::Symbol)
    haskey(BACKENDS, backend) ||
        throw(ArgumentError("backend must be :auto, :cpu or :cuda, got :$backend"))
    return BACKENDS[backend]
end

# The C options, starting from the library's defaults (which fill in struct_size).
function options(; backend::Symbol=:auto, log::Bool=false, num_threads::Integer=0,
                 stream::Ptr{Cvoid}=C_NULL)
    d = @ccall $(FN[:softmax_default_options])()::Options
    return Options(d.struct_size, backend_code(backend), log ? FLAG_LOG : UInt32(0), stream,
                   Int32(num_threads))
end

# (rows, cols) of the C matrix that a Julia array is: a Vector is one row, a Matrix's columns
# are its rows. Only the shape agreement that the C API cannot see is checked here.
c_shape(x::AbstractVector) = (1, length(x))
c_shape(x::AbstractMatrix) = (size(x, 2), size(x, 1))

function same_shape(y, x, what="y")
    size(y) == size(x) ||
        throw(DimensionMismatch("$what has size $(size(y)) but x has size $(size(x))"))
    return c_shape(x)
end

# The two C calls on raw pointers; memory and stream validity are the caller's business.
function rows_raw(x::Ptr{Cvoid}, y::Ptr{Cvoid}, rows::Integer, cols::Integer, dtype::Cint,
                  opts::Options)
    check(@ccall $(FN[:softmax_rows])(x::Ptr{Cvoid}, y::Ptr{Cvoid}, rows::Int64, cols::Int64,
                                      dtype::Cint, Ref(opts)::Ref{Options})::Cint)
end

function dropout_raw(x::Ptr{Cvoid}, y::Ptr{Cvoid}, mask::Ptr{UInt8}, rows::Integer,
                     cols::Integer, dtype::Cint, p::Real, seed::Integer, offset::Integer,
                     opts::Options)
    check(@ccall $(FN[:softmax_dropout])(x::Ptr{Cvoid}, y::Ptr{Cvoid}, mask::Ptr{UInt8},
                                         rows::Int64, cols::Int64, dtype::Cint, Float32(p)::Cfloat,
                                         UInt64(seed)::UInt64, UInt64(offset)::UInt64,
                                         Ref(opts)::Ref{Options})::Cint)
end

const HostArray{T} = Union{Vector{T},Matrix{T}}

"""
    softmax!(y, x; log=false, backend=:auto, num_threads=0) -> y

Softmax of each column of `x` (each element of a vector, as one row) into `y`, which may be `x`
itself. `log=true` gives log-softmax. `x` and `y`: `Vector` or `Matrix` of Float32 or Float16
(or `CuArray`s, with `using CUDA`).
"""
function softmax!(y::HostArray{T}, x::HostArray{T}; log::Bool=false, backend::Symbol=:auto,
                  num_threads::Integer=0) where {T<:Element}
    rows, cols = same_shape(y, x)
    opts = options(; backend, log, num_threads)
    GC.@preserve x y rows_raw(Ptr{Cvoid}(pointer(x)), Ptr{Cvoid}(pointer(y)), rows, cols,
                              DTYPE[T], opts)
    return y
end

softmax(x::AbstractArray; kw...) = softmax!(similar(x), x; kw...)
logsoftmax!(y, x; kw...) = softmax!(y, x; log=true, kw...)
logsoftmax(x::AbstractArray; kw...) = softmax!(similar(x), x; log=true, kw...)

"""
    softmax_dropout!(y, x, p, seed, offset=0; mask=nothing, backend=:auto, num_threads=0) -> y

Softmax of each column fused with inverted dropout: `y = keep ? softmax(x) / (1 - p) : 0`.
The keep decision for element `i` (its linear index minus one) is a pure function of
`(seed, offset, i)`, identical on the CPU and any GPU. If `mask` (an array of UInt8 of `x`'s
size) is given it receives 1 where kept and 0 where dropped.
"""
function softmax_dropout!(y::HostArray{T}, x::HostArray{T}, p::Real, seed::Integer,
                          offset::Integer=0; mask::Union{Nothing,HostArray{UInt8}}=nothing,
                          backend::Symbol=:auto, num_threads::Integer=0) where {T<:Element}
    rows, cols = same_shape(y, x)
    mask === nothing || same_shape(mask, x, "mask")
    opts = options(; backend, num_threads)
    GC.@preserve x y mask begin
        mptr = mask === nothing ? Ptr{UInt8}(C_NULL) : pointer(mask)
        dropout_raw(Ptr{Cvoid}(pointer(x)), Ptr{Cvoid}(pointer(y)), mptr, rows, cols, DTYPE[T],
                    p, seed, offset, opts)
    end
    return y
end

"""
    softmax_dropout(x, p, seed, offset=0; return_mask=false, kw...)

Allocating form of [`softmax_dropout!`](@ref); with `return_mask=true` returns `(y, mask)`.
"""
function softmax_dropout(x::AbstractArray, p::Real, seed::Integer, offset::Integer=0;
                         return_mask::Bool=false, kw...)
    y = similar(x)
    if return_mask
        mask = similar(x, UInt8)
        softmax_dropout!(y, x, p, seed, offset; mask, kw...)
        return y, mask
    end
    return softmax_dropout!(y, x, p, seed, offset; kw...)
end

end # module
