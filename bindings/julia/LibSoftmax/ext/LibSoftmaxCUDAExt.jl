# CuArray methods for LibSoftmax: device pointers handed to the C library with CUDA.jl's current
# task-local stream (`CUDA.stream()`), so the kernel is ordered after the work that produced x
# and before whatever the task queues next. The call returns once the kernel is queued, like
# any CUDA.jl operation. libsoftmax's CUDA runtime uses the device's primary context, which is
# also the context CUDA.jl uses.
module LibSoftmaxCUDAExt

using CUDA
using LibSoftmax
using LibSoftmax: Element, DTYPE, same_shape, options, rows_raw, dropout_raw

const DeviceArray{T} = Union{CuVector{T},CuMatrix{T}}

devptr(a) = reinterpret(Ptr{Cvoid}, pointer(a))
streamptr() = reinterpret(Ptr{Cvoid}, CUDA.stream().handle)

function LibSoftmax.softmax!(y::DeviceArray{T}, x::DeviceArray{T}; log::Bool=false,
                             backend::Symbol=:cuda, num_threads::Integer=0) where {T<:Element}
    rows, cols = same_shape(y, x)
    opts = options(; backend, log, num_threads, stream=streamptr())
    GC.@preserve x y rows_raw(devptr(x), devptr(y), rows, cols, DTYPE[T], opts)
    return y
end

function LibSoftmax.softmax_dropout!(y::DeviceArray{T}, x::DeviceArray{T}, p::Real,
                                     seed::Integer, offset::Integer=0;
                                     mask::Union{Nothing,DeviceArray{UInt8}}=nothing,
                                     backend::Symbol=:cuda,
                                     num_threads::Integer=0) where {T<:Element}
    rows, cols = same_shape(y, x)
    mask === nothing || same_shape(mask, x, "mask")
    opts = options(; backend, num_threads, stream=streamptr())
    GC.@preserve x y mask begin
        mptr = mask === nothing ? Ptr{UInt8}(C_NULL) : reinterpret(Ptr{UInt8}, pointer(mask))
        dropout_raw(devptr(x), devptr(y), mptr, rows, cols, DTYPE[T], p, seed, offset, opts)
    end
    return y
end

end # module
